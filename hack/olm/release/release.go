// Package release reads hack/olm/releases, the versions of Quartet that shipped and their
// commits, for the tools that rebuild a release (hack/images) and the tests that check its
// frozen bundle (test/bundlevalidation). hack/olm/catalog.sh reads the same file.
package release

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Release is one line of hack/olm/releases: a version that shipped, and its commit.
type Release struct{ Version, Commit string }

// Read reads hack/olm/releases under the repository's root, oldest first.
func Read(root string) ([]Release, error) {
	data, err := os.ReadFile(filepath.Join(root, "hack", "olm", "releases"))
	var out []Release
	for line := range strings.Lines(string(data)) {
		switch f := strings.Fields(line); {
		case len(f) == 0 || strings.HasPrefix(f[0], "#"):
		case len(f) != 2:
			return nil, fmt.Errorf("hack/olm/releases: malformed line %q", line)
		default:
			out = append(out, Release{f[0], f[1]})
		}
	}
	if err == nil && len(out) == 0 {
		err = errors.New("hack/olm/releases lists no release")
	}
	return out, err
}
