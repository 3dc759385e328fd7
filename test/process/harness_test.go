// Package process runs the real manager binary as a separate process against the full local
// cluster, to prove what only a process can show: surviving SIGKILL mid-work, a
// kube-apiserver restart, and leader election between two managers.
package process

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/quartet-operator/quartet/test/localcluster"
	"github.com/quartet-operator/quartet/test/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	code := testenv.RunSuite(m, testenv.Full, &env)
	if managerDir != "" {
		_ = os.RemoveAll(managerDir) // 54 MB a run, left in /tmp before
	}
	os.Exit(code)
}

// managerDir holds the manager binary buildManager built; "" until it has.
var managerDir string

// buildManager builds the manager once per test binary, as the Dockerfile builds the
// image's binary (no cgo, trimmed paths, no symbol table or DWARF): what runs in the
// cluster, down to its resident size.
var buildManager = sync.OnceValues(func() (string, error) {
	root, err := localcluster.RepoRoot()
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "quartet-manager-")
	if err != nil {
		return "", err
	}
	managerDir = dir
	bin := filepath.Join(dir, "manager")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, ".")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
})

// managerBinary returns the manager binary, built on first use.
func managerBinary(t testing.TB) string {
	t.Helper()
	bin, err := buildManager()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// manager is one running manager process.
type manager struct {
	t    testing.TB
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

// startManager runs the manager binary against the test cluster with args added to the
// defaults (no metrics, no probes, the operator namespace quartet-system).
func startManager(t testing.TB, name string, args ...string) *manager {
	t.Helper()
	bin := managerBinary(t)
	logPath := filepath.Join(t.TempDir(), name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	// kwok's pods serve nothing and the cluster has no upstream: the mirror probes are the
	// real-node tests' business (test/e2e).
	all := append([]string{"--kubeconfig=" + env.Cluster.Kubeconfig, "--metrics-bind-address=0",
		"--health-probe-bind-address=0", "--registrymirror-probes=false"}, args...)
	cmd := exec.Command(bin, all...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append([]string{"POD_NAMESPACE=quartet-system"}, os.Environ()...) // a test's t.Setenv wins
	// A probe of a name or of a Service's address (10.0.0.0/24, routed off the machine) goes
	// to a proxy on loopback, which the probes' address rule refuses to dial: nothing leaves
	// the machine, not even a DNS question. Loopback targets are never proxied.
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"} {
		cmd.Env = append(cmd.Env, k+"=http://127.0.0.1:9")
	}
	cmd.Env = append(cmd.Env, "NO_PROXY=", "no_proxy=")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	m := &manager{t: t, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(m.done) }()
	t.Cleanup(func() {
		m.kill()
		if t.Failed() {
			lines := strings.Split(strings.TrimSpace(m.logs()), "\n")
			if len(lines) > 60 {
				lines = lines[len(lines)-60:]
			}
			t.Logf("last lines of manager %s:\n%s", name, strings.Join(lines, "\n"))
		}
	})
	return m
}

// kill sends SIGKILL and waits for the process to go.
func (m *manager) kill() {
	if m.exited() {
		return
	}
	_ = m.cmd.Process.Signal(syscall.SIGKILL)
	<-m.done
}

// stop sends SIGTERM and waits up to 30 s.
func (m *manager) stop() {
	if m.exited() {
		return
	}
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.done:
	case <-time.After(30 * time.Second):
		m.kill()
	}
}

func (m *manager) exited() bool {
	select {
	case <-m.done:
		return true
	default:
		return false
	}
}

// logs returns what the manager printed so far.
func (m *manager) logs() string {
	b, _ := os.ReadFile(m.log)
	return string(b)
}
