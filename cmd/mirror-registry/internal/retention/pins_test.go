package retention

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"
	v1 "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParsePins(t *testing.T) {
	a, b, c := dg("a"), dg("b"), dg("c")
	tests := []struct {
		name        string
		in          string
		want        map[digest.Digest]bool
		wantInvalid []string
	}{
		{name: "empty", in: "", want: map[digest.Digest]bool{}},
		{
			name: "bare digests, image references and pod imageIDs",
			in: a.String() + "\n" +
				"registry.example:5000/library/nginx@" + b.String() + "\n" +
				"docker-pullable://docker.io/library/busybox@" + c.String() + "\n",
			want: map[digest.Digest]bool{a: true, b: true, c: true},
		},
		{
			name: "comments, blank lines and spaces",
			in:   "# written by the operator\n\n   " + a.String() + "   \n",
			want: map[digest.Digest]bool{a: true},
		},
		{
			name:        "a bad line is reported and does not unpin the rest",
			in:          "nginx:latest\n" + a.String() + "\nsha256:tooshort\n",
			want:        map[digest.Digest]bool{a: true},
			wantInvalid: []string{"nginx:latest", "sha256:tooshort"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, invalid, err := ParsePins(strings.NewReader(tt.in))
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.wantInvalid, invalid)
		})
	}
}

func TestParsePinnedImages(t *testing.T) {
	a, b := dg("a"), dg("b")
	got, invalid, err := ParsePinnedImages(strings.NewReader(strings.Join([]string{
		"# the operator's header",
		"docker.io/library/nginx@" + a.String(),
		"nginx@" + a.String(), // the same image, normalised: once
		"docker-pullable://registry.example:5000/team/app@" + b.String(),
		"ghcr.io/org/tool@" + b.String(),
		"ghcr.io/org/tool:v1.2@" + b.String(), // a pod's spec tag and imageID digest
		b.String(),
		"not a name!@" + a.String(), // not a repository name: the digest is still pinned
		"nginx:latest",
	}, "\n")))
	require.NoError(t, err)
	assert.Equal(t, []Pin{
		{Repository: "library/nginx", Digest: a},
		{Repository: "team/app", Digest: b},
		{Repository: "org/tool", Digest: b},
		{Repository: "org/tool", Tag: "v1.2", Digest: b},
		{Digest: b},
		{Digest: a},
	}, got)
	assert.Equal(t, []string{"nginx:latest"}, invalid)
	assert.Equal(t, "library/nginx@"+a.String(), got[0].String())
	assert.Equal(t, "org/tool:v1.2@"+b.String(), got[3].String())
	assert.Equal(t, b.String(), got[4].String())
}

func TestParsePlatforms(t *testing.T) {
	got, err := ParsePlatforms("linux/amd64, linux/arm64/v8")
	require.NoError(t, err)
	assert.Equal(t, []v1.Platform{{OS: "linux", Architecture: "amd64"}, {OS: "linux", Architecture: "arm64", Variant: "v8"}}, got)
	for _, bad := range []string{"", "linux", "linux/", "/amd64", "linux/arm64/", "a/b/c/d"} {
		_, err := ParsePlatforms(bad)
		assert.Error(t, err, bad)
	}
}

func TestPinFileIsReadAgainWhenItChanges(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pinned")
	p := pinFile{path: path}

	pins, changed, _, err := p.load()
	require.NoError(t, err)
	assert.True(t, changed, "the first look counts as a change")
	assert.Empty(t, pins, "a missing file pins nothing")

	require.NoError(t, os.WriteFile(path, []byte(dg("a").String()+"\n"), 0o644))
	pins, changed, _, err = p.load()
	require.NoError(t, err)
	assert.True(t, changed)
	assert.Equal(t, map[digest.Digest]bool{dg("a"): true}, pins)

	pins, changed, _, err = p.load()
	require.NoError(t, err)
	assert.False(t, changed, "an unchanged file is not read again")
	assert.Equal(t, map[digest.Digest]bool{dg("a"): true}, pins)

	// As a ConfigMap volume updates: a new file renamed over the old one.
	next := path + ".new"
	require.NoError(t, os.WriteFile(next, []byte(dg("b").String()+"\n"), 0o644))
	require.NoError(t, os.Rename(next, path))
	pins, changed, _, err = p.load()
	require.NoError(t, err)
	assert.True(t, changed)
	assert.Equal(t, map[digest.Digest]bool{dg("b"): true}, pins)

	require.NoError(t, os.Remove(path))
	pins, changed, _, err = p.load()
	require.NoError(t, err)
	assert.True(t, changed)
	assert.Empty(t, pins)
}

func TestPinFileUnreadableKeepsPreviousPins(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "pinned")
	require.NoError(t, os.WriteFile(path, []byte(dg("a").String()+"\n"), 0o644))
	p := pinFile{path: path}
	_, _, _, err := p.load()
	require.NoError(t, err)

	// A line longer than the parser's limit makes the file unreadable.
	require.NoError(t, os.WriteFile(path, []byte(strings.Repeat("x", 2<<20)), 0o644))
	pins, changed, _, err := p.load()
	require.Error(t, err)
	assert.False(t, changed)
	assert.Equal(t, map[digest.Digest]bool{dg("a"): true}, pins)
}

func FuzzParsePins(f *testing.F) {
	f.Add(dg("a").String() + "\n# c\nimage@" + dg("b").String())
	f.Add("@@@\n\x00")
	f.Fuzz(func(t *testing.T, in string) {
		pins, _, err := ParsePins(strings.NewReader(in))
		if err != nil {
			return
		}
		for d := range pins {
			require.NoError(t, d.Validate(), "only valid digests are pinned")
		}
	})
}
