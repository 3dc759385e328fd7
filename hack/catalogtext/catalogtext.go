// Package catalogtext is the one source of what each kind does in the catalogues: the
// "what it does" column of README.md's table of kinds. make bundle puts each text as the
// first paragraph of the kind's section of the CSV's description (hack/olm/csvtext), make
// helm into the chart README's table (hack/helmchart); test/bundlevalidation fails when
// either differs from README.md.
package catalogtext

import (
	"fmt"
	"regexp"
	"strings"
)

// A Kind is a row of README.md's table of kinds.
type Kind struct {
	Name  string // ChaosAgent
	Group string // blackadder.io
	Does  string // what it does, one paragraph of Markdown
}

var row = regexp.MustCompile("(?m)^\\| `([A-Za-z]+)`[^|]* \\| `([a-z.]+)`[^|]* \\| ([^|]+) \\|$")

// Kinds reads the table of README.md's text.
func Kinds(readme string) ([]Kind, error) {
	var out []Kind
	for _, m := range row.FindAllStringSubmatch(readme, -1) {
		out = append(out, Kind{Name: m[1], Group: m[2], Does: strings.TrimSpace(m[3])})
	}
	if len(out) != 4 {
		return nil, fmt.Errorf("README.md: %d rows in the table of kinds, want 4", len(out))
	}
	return out, nil
}

// Wrap breaks text into lines of at most width characters (a longer word stays whole).
func Wrap(text string, width int) []string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(text) {
		if line != "" && len(line)+1+len(w) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += w
	}
	return append(lines, line)
}

// Normalize is text with every run of white space one space: how a Markdown paragraph reads.
func Normalize(text string) string { return strings.Join(strings.Fields(text), " ") }

// SetLeads makes the first paragraph after each kind's "### <Name> (" heading in a CSV's
// YAML text (spec.description, a block scalar indented by four spaces) that kind's text,
// wrapped at 92 columns, and returns the new YAML text.
func SetLeads(csv string, kinds []Kind) (string, error) {
	lines := strings.Split(csv, "\n")
	for _, k := range kinds {
		h := -1
		for i, l := range lines {
			if strings.HasPrefix(l, "    ### "+k.Name+" (") {
				h = i
				break
			}
		}
		if h < 0 || h+2 >= len(lines) || lines[h+1] != "" {
			return "", fmt.Errorf("CSV description: no \"### %s (\" heading followed by a blank line", k.Name)
		}
		end := h + 2
		for end < len(lines) && strings.TrimSpace(lines[end]) != "" {
			end++
		}
		var lead []string
		for _, l := range Wrap(k.Does, 92) {
			lead = append(lead, "    "+l)
		}
		lines = append(lines[:h+2], append(lead, lines[end:]...)...)
	}
	return strings.Join(lines, "\n"), nil
}
