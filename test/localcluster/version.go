package localcluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// ControlPlaneGoMod is the module, relative to the repository root, that pins the
// control plane and the real node's binaries; `make controlplane` builds them from it
// into bin/k8s/<KubernetesVersion>/.
const ControlPlaneGoMod = "hack/tools/controlplane/go.mod"

// KubernetesVersion is the Kubernetes release the project builds and tests against
// ("v1.37.1"): the k8s.io/kubernetes requirement of ControlPlaneGoMod, the one place it
// is written. The Makefile reads the same line (K8S_VERSION).
func KubernetesVersion() (string, error) {
	v := controlPlaneVersions()
	return v.kubernetes, v.err
}

// EtcdVersion is the etcd release the control plane runs: the go.etcd.io/etcd/server/v3
// requirement of ControlPlaneGoMod.
func EtcdVersion() (string, error) {
	v := controlPlaneVersions()
	return v.etcd, v.err
}

type versions struct {
	kubernetes, etcd string
	err              error
}

var controlPlaneVersions = sync.OnceValue(func() versions {
	root, err := RepoRoot()
	if err != nil {
		return versions{err: err}
	}
	path := filepath.Join(root, ControlPlaneGoMod)
	data, err := os.ReadFile(path)
	if err != nil {
		return versions{err: fmt.Errorf("reading the control plane's versions: %w", err)}
	}
	var v versions
	if v.kubernetes, err = requirement(data, "k8s.io/kubernetes"); err != nil {
		return versions{err: fmt.Errorf("%s: %w", path, err)}
	}
	if v.etcd, err = requirement(data, "go.etcd.io/etcd/server/v3"); err != nil {
		return versions{err: fmt.Errorf("%s: %w", path, err)}
	}
	return v
})

// requirement returns the version go.mod requires of module: the line
// "<module> <version>" in a require block or "require <module> <version>" (a replace
// line "<module> => …" does not match). It reads the file the way the Makefile's awk does,
// so the main module needs no go.mod parser.
func requirement(gomod []byte, module string) (string, error) {
	for line := range strings.Lines(string(gomod)) {
		if i := strings.Index(line, "//"); i >= 0 {
			line = line[:i]
		}
		f := strings.Fields(line)
		if len(f) > 0 && f[0] == "require" {
			f = f[1:]
		}
		if len(f) == 2 && f[0] == module && strings.HasPrefix(f[1], "v") {
			return f[1], nil
		}
	}
	return "", fmt.Errorf("no requirement of %s", module)
}
