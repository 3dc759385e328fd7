package hoststoml

import (
	"fmt"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRenderBytes(t *testing.T) {
	got, err := Render("first line\nsecond line", File{
		Server: "https://registry.example:5000",
		Mirror: Host{URL: "https://registry.example:5000", Capabilities: []string{"pull", "resolve"}, CA: "/pki/ca.crt", SkipVerify: true},
	})
	require.NoError(t, err)
	assert.Equal(t, `# first line
# second line
server = "https://registry.example:5000"

[host]
  [host."https://registry.example:5000"]
    capabilities = ["pull", "resolve"]
    ca = "/pki/ca.crt"
    skip_verify = true
`, string(got))

	got, err = Render("", File{Server: "http://up:5010", Mirror: Host{URL: "http://10.0.0.7:5000", Capabilities: []string{"pull"}}})
	require.NoError(t, err)
	assert.Equal(t, "server = \"http://up:5010\"\n\n[host]\n  [host.\"http://10.0.0.7:5000\"]\n    capabilities = [\"pull\"]\n", string(got),
		"no comment line; ca and skip_verify left out when unset")
}

// TestRenderEscapesAsTOML: values with characters TOML escapes differently from Go's %q
// (which the renderers used before) read back unchanged through a TOML decoder.
func TestRenderEscapesAsTOML(t *testing.T) {
	for _, ca := range []string{
		`C:\certs\ca.crt`,      // backslashes
		"/pki/ünïcode/ca.crt",  // non-ASCII
		`/pki/"quoted"/ca.crt`, // a quote
		"/pki/del\x7f/ca.crt",  // %q writes \x7f, which TOML 1.0 (containerd's) lacks
		"/pki/vt\v/ca.crt",     // %q writes \v, which no TOML has
		"/pki/nbsp\u00a0/ca.crt",
	} {
		t.Run(ca, func(t *testing.T) {
			f := File{Server: "https://quay.io", Mirror: Host{URL: "http://127.0.0.1:35000", Capabilities: []string{"pull"}, CA: ca}}
			out, err := Render("comment", f)
			require.NoError(t, err)
			var doc struct {
				Server string
				Host   map[string]struct {
					Capabilities []string
					CA           string
				}
			}
			_, err = toml.Decode(string(out), &doc)
			require.NoError(t, err, "%s", out)
			assert.Equal(t, "https://quay.io", doc.Server)
			require.Contains(t, doc.Host, "http://127.0.0.1:35000")
			assert.Equal(t, ca, doc.Host["http://127.0.0.1:35000"].CA)
			assert.Equal(t, []string{"pull"}, doc.Host["http://127.0.0.1:35000"].Capabilities)
		})
	}
	// What Go's %q wrote for the vertical tab is no TOML at all.
	_, err := toml.Decode(fmt.Sprintf("ca = %q\n", "/pki/vt\v/ca.crt"), new(map[string]any))
	assert.Error(t, err, "the old Sprintf renderers wrote invalid TOML for this value")
}

func TestRenderRefuses(t *testing.T) {
	f := File{Server: "https://quay.io", Mirror: Host{URL: "http://127.0.0.1:35000", Capabilities: []string{"pull"}}}
	_, err := Render("owner\rwith a carriage return", f)
	assert.ErrorContains(t, err, "control character")
	bad := f
	bad.Mirror.CA = "/pki/\xff.crt" // not UTF-8: no TOML string holds it
	_, err = Render("", bad)
	assert.Error(t, err)
}

func TestParse(t *testing.T) {
	f := File{Server: "https://quay.io", Mirror: Host{URL: "http://127.0.0.1:35000", Capabilities: []string{"pull", "resolve"}, CA: "/ca.crt"}}
	out, err := Render("x", f)
	require.NoError(t, err)
	back, err := Parse(out)
	require.NoError(t, err)
	assert.Equal(t, f, back)
	_, err = Parse([]byte("server = \"https://quay.io\"\n"))
	assert.ErrorContains(t, err, "0 host tables")
	_, err = Parse([]byte("server = \"https://quay.io\"\n[host.\"a\"]\n[host.\"b\"]\n"))
	assert.ErrorContains(t, err, "2 host tables")
	_, err = Parse([]byte("server = 'unterminated\n"))
	assert.Error(t, err)
}

func FuzzRender(f *testing.F) {
	f.Add("ns/a", "http://127.0.0.1:35000", `C:\ca.crt`)
	f.Add("", "https://ü", "\x7f")
	f.Fuzz(func(t *testing.T, comment, url, ca string) {
		in := File{Server: "https://quay.io", Mirror: Host{URL: url, Capabilities: []string{"pull"}, CA: ca}}
		out, err := Render(comment, in)
		if err != nil {
			return // refused, rather than written wrong
		}
		back, err := Parse(out)
		require.NoError(t, err)
		require.Equal(t, in, back)
		if comment != "" {
			require.True(t, strings.HasPrefix(string(out), "# "+strings.Split(comment, "\n")[0]+"\n"))
		}
	})
}
