package testenv

import (
	"io/fs"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// Files lists the files below dir (not the directories), as slash-separated paths relative
// to dir, in fs.WalkDir's order.
func Files(t testing.TB, dir string) []string {
	t.Helper()
	var out []string
	require.NoError(t, fs.WalkDir(os.DirFS(dir), ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			out = append(out, p)
		}
		return err
	}))
	return out
}
