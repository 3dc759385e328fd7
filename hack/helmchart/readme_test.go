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

// readmeRow matches a row of the README's values table: value, type, default, meaning.
var readmeRow = regexp.MustCompile("^\\| `([^`]+)` \\| ([^|]+) \\| `([^`]*)` \\| (.+) \\|$")

// TestChartReadmeListsEveryValue: the chart's README has a row for every value of
// values.yaml (a value, or an object whose content is free-form, like resources), with
// values.yaml's default and a type from values.schema.json, and the schema knows every value
// values.yaml has.
func TestChartReadmeListsEveryValue(t *testing.T) {
	read := func(name string) []byte {
		b, err := os.ReadFile("../../charts/quartet/" + name)
		require.NoError(t, err)
		return b
	}
	var values, schema map[string]any
	require.NoError(t, yaml.Unmarshal(read("values.yaml"), &values))
	require.NoError(t, json.Unmarshal(read("values.schema.json"), &schema))
	rows := map[string][]string{}
	for _, line := range strings.Split(string(read("README.md")), "\n") {
		if m := readmeRow.FindStringSubmatch(line); m != nil {
			require.NotContains(t, rows, m[1], "README lists %s twice", m[1])
			rows[m[1]] = m[2:]
		}
	}
	require.NotEmpty(t, rows, "README.md has no values table")
	// Every value, or an object holding it, is listed; the schema has it down to that row.
	for _, leaf := range leafPaths("", values) {
		keys := strings.Split(leaf, ".")
		listed := false
		for i := 0; i < len(keys) && !listed; i++ {
			p := strings.Join(keys[:i+1], ".")
			_, inSchema := lookup(schema, p, true)
			assert.True(t, inSchema, "values.schema.json lacks %s", p)
			_, listed = rows[p]
		}
		assert.True(t, listed, "README.md does not list %s", leaf)
	}
	for p, row := range rows {
		v, ok := lookup(values, p, false)
		if !assert.True(t, ok, "README.md lists %s, which values.yaml lacks", p) {
			continue
		}
		def, err := json.Marshal(v)
		require.NoError(t, err)
		assert.Equal(t, string(def), row[1], "README.md's default of %s", p)
		if s, ok := lookup(schema, p, true); assert.True(t, ok, "values.schema.json lacks %s", p) {
			assert.Equal(t, schemaType(s.(map[string]any)), strings.TrimSpace(row[0]), "README.md's type of %s", p)
		}
		assert.NotEmpty(t, strings.TrimSpace(row[2]), "README.md does not say what %s means", p)
	}
	// No value in the schema values.yaml lacks (but global, what a parent chart passes).
	for k := range schema["properties"].(map[string]any) {
		_, ok := values[k]
		assert.True(t, ok || k == "global", "values.schema.json has %s, which values.yaml lacks", k)
	}
}
