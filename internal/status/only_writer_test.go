package status

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOnlyTheWriterWritesStatus fails on a status write in the product's code anywhere but
// this package: a call of Status() or SubResource("status") on a client, outside tests.
// Every controller ends its passes through Writer.Finish.
func TestOnlyTheWriterWritesStatus(t *testing.T) {
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	var found []string
	for _, dir := range []string{"api", "controllers", "internal", "cmd", "main.go"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			if rel, _ := filepath.Rel(root, path); filepath.Dir(rel) == filepath.Join("internal", "status") {
				return nil
			}
			found = append(found, statusWrites(t, path)...)
			return nil
		})
		require.NoError(t, err)
	}
	assert.Empty(t, found, "status is written through status.Writer.Finish only")

	// The check finds what it looks for.
	assert.Len(t, statusWrites(t, "write.go"), 1, "write.go's own Status().Patch")
}

// statusWrites lists the status writes in one file: Patch, Update, Apply or Create called
// on Status() or SubResource("status") of a client.
func statusWrites(t *testing.T, path string) []string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, 0)
	require.NoError(t, err)
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		write, ok := call.Fun.(*ast.SelectorExpr)
		if !ok || !slices.Contains([]string{"Patch", "Update", "Apply", "Create"}, write.Sel.Name) {
			return true
		}
		if sub, ok := write.X.(*ast.CallExpr); ok && isStatusSubResource(sub) {
			out = append(out, fset.Position(call.Pos()).String())
		}
		return true
	})
	return out
}

// isStatusSubResource reports whether call is X.Status() or X.SubResource("status").
func isStatusSubResource(call *ast.CallExpr) bool {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	if sel.Sel.Name == "Status" && len(call.Args) == 0 {
		return true
	}
	if sel.Sel.Name != "SubResource" || len(call.Args) != 1 {
		return false
	}
	lit, ok := call.Args[0].(*ast.BasicLit)
	if !ok {
		return false
	}
	v, _ := strconv.Unquote(lit.Value)
	return v == "status"
}
