package main

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// The chart's tests as a whole (helm lint and template, the schema, the values, the
// Artifact Hub annotations) live in test/chart; this one checks the README the generator
// writes with the generator's own path helpers.

func readChartFile(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("../../charts/quartet/" + name)
	require.NoError(t, err)
	return b
}

// readmeRow matches a row of the README's values table: value, type, default.
var readmeRow = regexp.MustCompile("^\\| `([^`]+)` \\| ([^|]+) \\| `([^`]*)` \\| (.+) \\|$")

// TestChartReadmeListsEveryValue: the chart's README has a row for every value of
// values.yaml (a value, or an object whose content is free-form, like resources), with
// values.yaml's default and a type from values.schema.json, and the schema knows every value
// values.yaml has.
func TestChartReadmeListsEveryValue(t *testing.T) {
	var values map[string]any
	require.NoError(t, yaml.Unmarshal(readChartFile(t, "values.yaml"), &values))
	var schema map[string]any
	require.NoError(t, json.Unmarshal(readChartFile(t, "values.schema.json"), &schema))

	rows := map[string][]string{}
	var order []string
	for _, line := range strings.Split(string(readChartFile(t, "README.md")), "\n") {
		if m := readmeRow.FindStringSubmatch(line); m != nil {
			require.NotContains(t, rows, m[1], "README lists %s twice", m[1])
			rows[m[1]] = m[2:]
			order = append(order, m[1])
		}
	}
	require.NotEmpty(t, rows, "README.md has no values table")
	for _, leaf := range leafPaths("", values) {
		found := false
		for p := range rows {
			found = found || leaf == p || strings.HasPrefix(leaf, p+".")
		}
		assert.True(t, found, "README.md does not list %s", leaf)
	}
	for _, p := range order {
		v, ok := lookup(values, p, false)
		if !assert.True(t, ok, "README.md lists %s, which values.yaml lacks", p) {
			continue
		}
		def, err := json.Marshal(v)
		require.NoError(t, err)
		assert.Equal(t, string(def), rows[p][1], "README.md's default of %s", p)
		s, ok := lookup(schema, p, true)
		if assert.True(t, ok, "values.schema.json lacks %s", p) {
			assert.Equal(t, schemaType(s.(map[string]any)), strings.TrimSpace(rows[p][0]), "README.md's type of %s", p)
		}
		assert.NotEmpty(t, strings.TrimSpace(rows[p][2]), "README.md does not say what %s means", p)
	}
	// Every value in the schema, and no value in the schema values.yaml lacks (but global,
	// what a parent chart passes).
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		m, ok := v.(map[string]any)
		if !ok {
			return
		}
		for k, x := range m {
			p := strings.TrimPrefix(prefix+"."+k, ".")
			if _, ok := lookup(schema, p, true); !ok {
				t.Errorf("values.schema.json lacks %s", p)
			}
			if _, isDoc := rows[p]; !isDoc {
				walk(p, x)
			}
		}
	}
	walk("", values)
	var top []string
	for k := range schema["properties"].(map[string]any) {
		if _, ok := values[k]; !ok && k != "global" {
			top = append(top, k)
		}
	}
	assert.Empty(t, top, "values.schema.json has values values.yaml lacks")
}
