// Package hoststoml renders containerd's hosts.toml (certs.d/<registry>/hosts.toml) from a
// typed File with a TOML encoder, so every value is escaped as TOML (not as Go) escapes
// it. The node agent and the test tooling (the real node, the e2e tests) share it.
package hoststoml

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"unicode"

	"github.com/BurntSushi/toml"
)

// File is containerd's hosts.toml for one registry: pulls go to Mirror first, for what its
// capabilities allow, and fall back to Server.
//
// It holds one mirror, all Quartet writes: containerd tries the hosts in the file's order,
// and a TOML encoder writes a table's keys sorted, so an order of several hosts would not
// survive encoding.
type File struct {
	// Server is the registry's own endpoint (scheme://host[:port]), tried after the mirror.
	Server string
	// Mirror is the [host."<URL>"] table.
	Mirror Host
}

// Host is one [host."<URL>"] table of hosts.toml.
type Host struct {
	// URL is the table's key (scheme://host[:port]).
	URL string `toml:"-"`
	// Capabilities are what containerd asks this host for: "pull" (content by digest,
	// which containerd verifies), "resolve" (tags to digests), "push".
	Capabilities []string `toml:"capabilities"`
	// CA is the path of a CA certificate to trust for this host.
	CA string `toml:"ca,omitempty"`
	// SkipVerify disables TLS verification of this host.
	SkipVerify bool `toml:"skip_verify,omitempty"`
}

// document is File as containerd reads it.
type document struct {
	Server string          `toml:"server"`
	Host   map[string]Host `toml:"host"`
}

// Render returns hosts.toml for f, starting with comment, one "# " line per line of
// comment (none when comment is empty): a TOML encoder writes no comments. It returns an
// error, rather than a file containerd would misread, when comment holds a character a
// TOML comment may not hold or the encoded file does not decode back to f.
func Render(comment string, f File) ([]byte, error) {
	var b bytes.Buffer
	if comment != "" {
		for line := range strings.SplitSeq(comment, "\n") {
			if i := strings.IndexFunc(line, func(r rune) bool { return r != '\t' && unicode.IsControl(r) }); i >= 0 {
				return nil, fmt.Errorf("hosts.toml comment %q: control character at byte %d", line, i)
			}
			b.WriteString("# " + line + "\n")
		}
	}
	doc := document{Server: f.Server, Host: map[string]Host{f.Mirror.URL: f.Mirror}}
	if err := toml.NewEncoder(&b).Encode(doc); err != nil {
		return nil, fmt.Errorf("encoding hosts.toml: %w", err)
	}
	back, err := Parse(b.Bytes())
	if err != nil {
		return nil, fmt.Errorf("hosts.toml does not decode: %w", err)
	}
	want := f
	if len(want.Mirror.Capabilities) == 0 {
		// capabilities = [] decodes as an empty, non-nil slice.
		want.Mirror.Capabilities, back.Mirror.Capabilities = nil, nil
	}
	if !reflect.DeepEqual(back, want) {
		return nil, fmt.Errorf("hosts.toml decodes as %+v, not %+v", back, want)
	}
	return b.Bytes(), nil
}

// Parse decodes a hosts.toml holding one host table (as Render writes).
func Parse(data []byte) (File, error) {
	var doc document
	if _, err := toml.Decode(string(data), &doc); err != nil {
		return File{}, err
	}
	if len(doc.Host) != 1 {
		return File{}, fmt.Errorf("%d host tables, want 1", len(doc.Host))
	}
	f := File{Server: doc.Server}
	for url, h := range doc.Host {
		h.URL = url
		f.Mirror = h
	}
	return f, nil
}
