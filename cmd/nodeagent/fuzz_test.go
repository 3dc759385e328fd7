package nodeagent

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// FuzzHostsTOMLOwner: reading any file found on a node never panics, and a file the
// agent renders always reads back as its owner's.
func FuzzHostsTOMLOwner(f *testing.F) {
	f.Add("ns/a", "")
	f.Add("ns/b", "server = \"x\"\n")
	f.Add("", hostsTOMLMarker)
	f.Fuzz(func(t *testing.T, owner, content string) {
		_, _ = hostsTOMLOwner(content)
		if strings.ContainsAny(owner, ";\n") {
			return
		}
		content, err := renderHostsTOML(owner, "https://quay.io", "http://127.0.0.1:35000", DefaultCapabilities)
		if err != nil {
			if !strings.ContainsFunc(owner, unicode.IsControl) && utf8.ValidString(owner) {
				t.Fatalf("owner %q refused: %v", owner, err)
			}
			return // a comment may not hold control characters
		}
		got, managed := hostsTOMLOwner(content)
		if !managed || got != owner {
			t.Fatalf("owner %q read back as %q (managed %v)", owner, got, managed)
		}
	})
}
