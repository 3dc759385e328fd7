package release

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRead(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		want       []Release
		err        string
	}{
		{"two releases, comments and blank lines", "# version commit\n\n0.2.0 abc\n0.3.0 def\n", []Release{{"0.2.0", "abc"}, {"0.3.0", "def"}}, ""},
		{"a line of three fields", "0.2.0 abc extra\n", nil, `malformed line "0.2.0 abc extra\n"`},
		{"a version without a commit", "0.2.0\n", nil, "malformed line"},
		{"no release", "# none yet\n", nil, "lists no release"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			require.NoError(t, os.MkdirAll(filepath.Join(root, "hack", "olm"), 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(root, "hack", "olm", "releases"), []byte(tc.file), 0o644))
			got, err := Read(root)
			if tc.err != "" {
				assert.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
	_, err := Read(t.TempDir())
	assert.ErrorIs(t, err, os.ErrNotExist, "a clone without the file")
}
