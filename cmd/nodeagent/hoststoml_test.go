package nodeagent

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func mustRenderHostsTOML(t *testing.T, owner, server, mirror string, capabilities []string) string {
	t.Helper()
	s, err := renderHostsTOML(owner, server, mirror, capabilities)
	require.NoError(t, err)
	return s
}

// TestHostsTOMLGolden pins the whole hosts.toml the agent writes: by default the mirror is
// trusted with content by digest only (containerd verifies it); resolve (tags) only when a
// RegistryHostGrant says so.
func TestHostsTOMLGolden(t *testing.T) {
	for _, tc := range []struct {
		file string
		caps []string
	}{
		{"hosts.golden.toml", DefaultCapabilities},
		{"hosts-resolve.golden.toml", []string{"pull", "resolve"}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			got := mustRenderHostsTOML(t, "mirrors/docker-hub", "https://registry-1.docker.io", "http://127.0.0.1:35000", tc.caps)
			path := filepath.Join("testdata", tc.file)
			if *update {
				require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
			}
			want, err := os.ReadFile(path)
			require.NoError(t, err, "golden file missing; run go test -run %s -update", t.Name())
			assert.Equal(t, string(want), got, "output differs from %s; if intended, rerun with -update", path)
		})
	}
}

// TestHostsTOMLDecodes: what the agent writes is TOML that says what containerd needs, also
// for values TOML escapes differently from Go (a backslash, non-ASCII, a control character),
// and its first line is the marker.
func TestHostsTOMLDecodes(t *testing.T) {
	for _, mirror := range []string{"http://127.0.0.1:35000", `http://mirror\ü` + "\x7f\v:35000"} {
		got := mustRenderHostsTOML(t, "ns/a", "https://quay.io", mirror, []string{"pull", "resolve"})
		assert.True(t, strings.HasPrefix(got, hostsTOMLMarker+"ns/a; removed when the mirror goes.\n"), got)
		var doc struct {
			Server string
			Host   map[string]struct{ Capabilities []string }
		}
		md, err := toml.Decode(got, &doc)
		require.NoError(t, err, got)
		assert.Empty(t, md.Undecoded(), "no keys but server and host.<mirror>.capabilities")
		assert.Equal(t, "https://quay.io", doc.Server)
		require.Contains(t, doc.Host, mirror, got)
		assert.Len(t, doc.Host, 1)
		assert.Equal(t, []string{"pull", "resolve"}, doc.Host[mirror].Capabilities)
	}
	_, err := renderHostsTOML("ns/a\rb", "https://quay.io", "http://127.0.0.1:35000", DefaultCapabilities)
	assert.ErrorContains(t, err, "control character", "an owner that would end the comment line is refused")
}

func TestHostsTOMLOwner(t *testing.T) {
	owner, managed := hostsTOMLOwner(mustRenderHostsTOML(t, "ns/a", "https://quay.io", "http://127.0.0.1:35000", DefaultCapabilities))
	assert.True(t, managed)
	assert.Equal(t, "ns/a", owner)
	_, managed = hostsTOMLOwner("server = \"https://quay.io\"\n")
	assert.False(t, managed)
	_, managed = hostsTOMLOwner("")
	assert.False(t, managed)
}

func TestHostsFile(t *testing.T) {
	dir := t.TempDir()
	mine := &hostsFile{dir: dir, owner: "ns/a", content: mustRenderHostsTOML(t, "ns/a", "https://quay.io", "http://127.0.0.1:35000", DefaultCapabilities)}
	path := filepath.Join(dir, "hosts.toml")

	wrote, prev, err := mine.ensure(false)
	require.NoError(t, err)
	assert.True(t, wrote)
	assert.Empty(t, prev)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, mine.content, string(b))
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o644), fi.Mode().Perm())

	wrote, _, err = mine.ensure(false)
	require.NoError(t, err)
	assert.False(t, wrote, "already right")

	// Another mirror's file: taken over only when starting.
	other := &hostsFile{dir: dir, owner: "ns/b", content: mustRenderHostsTOML(t, "ns/b", "https://quay.io", "http://127.0.0.1:35001", DefaultCapabilities)}
	_, _, err = other.ensure(false)
	assert.ErrorContains(t, err, "belongs to RegistryMirror ns/a")
	wrote, prev, err = other.ensure(true)
	require.NoError(t, err)
	assert.True(t, wrote)
	assert.Equal(t, "ns/a", prev)
	removed, err := mine.remove()
	require.NoError(t, err)
	assert.False(t, removed, "a mirror removes only its own file")
	removed, err = other.remove()
	require.NoError(t, err)
	assert.True(t, removed)
	assert.NoFileExists(t, path)
	removed, err = other.remove()
	require.NoError(t, err)
	assert.False(t, removed, "nothing to remove")

	// An administrator's own file is never touched.
	require.NoError(t, os.WriteFile(path, []byte("server = \"https://quay.io\"\n"), 0o600))
	_, _, err = mine.ensure(true)
	assert.ErrorContains(t, err, "not written by Quartet")
	removed, err = mine.remove()
	require.NoError(t, err)
	assert.False(t, removed)
	b, err = os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "server = \"https://quay.io\"\n", string(b))
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 1, "no temporary files left behind")
}
