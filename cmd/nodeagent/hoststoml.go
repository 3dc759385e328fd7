package nodeagent

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/quartet-operator/quartet/internal/hoststoml"
)

// hostsTOMLMarker starts every hosts.toml the node agent writes. The agent rewrites or
// removes only files that start with it: an administrator's own hosts.toml is never touched.
const hostsTOMLMarker = "# Managed by the Quartet operator for RegistryMirror "

// renderHostsTOML renders containerd's hosts.toml for one upstream: containerd tries the
// mirror first for what capabilities allow (pull: content by digest, which it verifies;
// resolve: tags, trusted from the mirror), then the server. Its first line is hostsTOMLMarker and owner.
func renderHostsTOML(owner, server, mirror string, capabilities []string) (string, error) {
	b, err := hoststoml.Render(strings.TrimPrefix(hostsTOMLMarker, "# ")+owner+"; removed when the mirror goes.", hoststoml.File{
		Server: server,
		Mirror: hoststoml.Host{URL: mirror, Capabilities: capabilities},
	})
	return string(b), err
}

// hostsTOMLOwner returns the mirror (namespace/name) a hosts.toml was written for, and whether Quartet wrote it.
func hostsTOMLOwner(content string) (owner string, managed bool) {
	first, _, _ := strings.Cut(content, "\n")
	rest, ok := strings.CutPrefix(first, hostsTOMLMarker)
	if !ok {
		return "", false
	}
	owner, _, _ = strings.Cut(rest, ";")
	return owner, true
}

// hostsFile is containerd's hosts.toml for one upstream, kept by one mirror's agent.
type hostsFile struct {
	dir, owner, content string
}

func (h *hostsFile) path() string { return filepath.Join(h.dir, "hosts.toml") }

// ensure writes hosts.toml unless it is already right, never over a file Quartet did not write, over another
// mirror's only when takeOver is set. It returns whether it wrote and the previous owner, if another mirror.
func (h *hostsFile) ensure(takeOver bool) (wrote bool, previousOwner string, err error) {
	existing, err := os.ReadFile(h.path())
	switch {
	case err == nil:
		owner, managed := hostsTOMLOwner(string(existing))
		if !managed {
			return false, "", fmt.Errorf("%s exists and was not written by Quartet; it is left alone", h.path())
		}
		if string(existing) == h.content {
			return false, "", nil
		}
		if owner != h.owner {
			if !takeOver {
				return false, "", fmt.Errorf("%s now belongs to RegistryMirror %s", h.path(), owner)
			}
			previousOwner = owner
		}
	case !errors.Is(err, os.ErrNotExist):
		return false, "", err
	}
	if err := writeFileAtomic(h.path(), []byte(h.content)); err != nil {
		return false, "", err
	}
	return true, previousOwner, nil
}

// remove deletes hosts.toml if this mirror wrote it.
func (h *hostsFile) remove() (bool, error) {
	existing, err := os.ReadFile(h.path())
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if owner, managed := hostsTOMLOwner(string(existing)); !managed || owner != h.owner {
		return false, nil
	}
	if err := os.Remove(h.path()); err != nil && !errors.Is(err, os.ErrNotExist) {
		return false, err
	}
	return true, nil
}

// writeFileAtomic writes through a temporary file and a rename: containerd never reads half a file.
func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".hosts.toml.*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	_, err = tmp.Write(data)
	// cmp.Or evaluates all three: the file is closed whatever failed, and the first error wins.
	if err := cmp.Or(err, tmp.Chmod(0o644), tmp.Close()); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
