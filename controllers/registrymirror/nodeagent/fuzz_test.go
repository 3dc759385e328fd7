package nodeagent

import (
	"strings"
	"testing"
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
		got, managed := hostsTOMLOwner(renderHostsTOML(owner, "https://quay.io", "http://127.0.0.1:35000", DefaultCapabilities))
		if !managed || got != owner {
			t.Fatalf("owner %q read back as %q (managed %v)", owner, got, managed)
		}
	})
}
