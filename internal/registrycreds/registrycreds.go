// Package registrycreds is the Docker credential helper a RegistryMirror's registry runs
// (the CNCF distribution registry's proxy.exec setting) to get the upstream's username and
// password. It is the manager binary itself, installed into the registry pod by an init
// container under HelperName, and it reads the credentials Secret mounted in that pod on
// every call the registry makes (once per Lifetime).
//
// Why not the registry's proxy.username and proxy.password: with those, distribution
// v3.0.0 asks the upstream for its authentication endpoints when it starts and panics
// when the upstream cannot be reached, so a mirror whose pod restarts while the data
// centre's outside connection is down crash-loops and its cache serves nothing. With
// proxy.exec it starts without contacting the upstream. Reading the mounted Secret on
// each call also makes a changed Secret take effect without restarting the registry,
// and no credential is ever written into the registry's configuration.
package registrycreds

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/docker/docker-credential-helpers/credentials"
)

const (
	// HelperName is the helper's file name (the docker-credential-<name> convention); the
	// manager runs as the helper when started under this name.
	HelperName = "docker-credential-quartet"
	// DefaultDir is where the registry pod mounts the credentials Secret (keys username
	// and password); DirEnv overrides it.
	DefaultDir = "/quartet/credentials"
	DirEnv     = "QUARTET_REGISTRY_CREDENTIALS_DIR"
)

// Helper answers `get` from the files username and password in Dir. Without them (a
// mirror with no credentialsSecretRef) it answers an empty username: the registry then
// pulls anonymously.
type Helper struct{ Dir string }

var errReadOnly = errors.New("the Quartet registry credential helper only reads credentials")

// Get returns the credentials for every server: a mirror has one upstream, and the same
// credentials go to its token endpoint.
func (h Helper) Get(string) (string, string, error) {
	user, err := os.ReadFile(filepath.Join(h.Dir, "username"))
	if errors.Is(err, fs.ErrNotExist) {
		return "", "", nil
	}
	if err != nil {
		return "", "", err
	}
	pass, err := os.ReadFile(filepath.Join(h.Dir, "password"))
	if err != nil {
		return "", "", fmt.Errorf("the credentials Secret has a username but no readable password: %w", err)
	}
	return strings.TrimSpace(string(user)), strings.TrimRight(string(pass), "\r\n"), nil
}

// Add is refused: credentials come from the Secret only.
func (Helper) Add(*credentials.Credentials) error { return errReadOnly }

// Delete is refused: credentials come from the Secret only.
func (Helper) Delete(string) error { return errReadOnly }

// List names no stored credentials.
func (Helper) List() (map[string]string, error) { return map[string]string{}, nil }

// IsHelper reports whether the program was started as the credential helper.
func IsHelper(argv0 string) bool { return filepath.Base(argv0) == HelperName }

// Main runs the helper protocol on stdin and stdout and exits.
func Main() {
	credentials.Serve(Helper{Dir: cmp.Or(os.Getenv(DirEnv), DefaultDir)})
}

// Install copies the running program to dest (a file named HelperName in a folder the
// registry container mounts), so the registry can run it. Used by the registry pod's
// init container: `manager install-credential-helper <dir>`.
func Install(dir string) (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	src, err := os.Open(self)
	if err != nil {
		return "", err
	}
	defer src.Close()
	dest := filepath.Join(dir, HelperName)
	tmp, err := os.CreateTemp(dir, "."+HelperName+"-*")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	_, err = io.Copy(tmp, src)
	// cmp.Or evaluates all three: the file is closed whatever failed, and the first error wins.
	if err := cmp.Or(err, tmp.Chmod(0o555), tmp.Close()); err != nil {
		return "", err
	}
	return dest, os.Rename(tmp.Name(), dest)
}
