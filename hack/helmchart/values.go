package main

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

//go:embed schema.yaml
var schemaYAML []byte

// valuesSchema is values.schema.json, as a map and as the file: schema.yaml, its
// registryMirror.hostGrants items completed with the RegistryHostGrant CRD's spec.
func valuesSchema(grantSpec map[string]any) (map[string]any, string, error) {
	props, _ := grantSpec["properties"].(map[string]any)
	for _, field := range []string{"host", "mirror", "capabilities"} {
		if props[field] == nil {
			return nil, "", fmt.Errorf("the RegistryHostGrant CRD's spec has no %s", field)
		}
	}
	var schema map[string]any
	if err := yaml.Unmarshal(schemaYAML, &schema); err != nil {
		return nil, "", err
	}
	grants, _ := lookup(schema, "registryMirror.hostGrants", true)
	fromCRD(grants.(map[string]any)["items"].(map[string]any), grantSpec)
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	err := enc.Encode(schema)
	return schema, out.String(), err
}

// fromCRD completes the JSON schema s with the CRD's OpenAPI schema crd, down its properties
// and items: the keywords that mean the same in JSON Schema (not default, x-kubernetes-* or
// CEL rules) and s lacks. Objects with properties are closed.
func fromCRD(s, crd map[string]any) {
	for k, v := range crd {
		switch k {
		case "properties":
			for name, p := range v.(map[string]any) {
				fromCRD(sub(sub(s, k), name), p.(map[string]any))
			}
		case "items":
			fromCRD(sub(s, k), v.(map[string]any))
		case "type", "description", "required", "enum", "pattern", "minLength", "maxLength", "minItems", "maxItems", "minimum", "maximum", "format":
			if s[k] == nil {
				s[k] = v
			}
		}
	}
	if s["type"] == "object" && s["properties"] != nil {
		s["additionalProperties"] = false
	}
}

// sub is m[k], an object, added if missing.
func sub(m map[string]any, k string) map[string]any {
	if _, ok := m[k].(map[string]any); !ok {
		m[k] = map[string]any{}
	}
	return m[k].(map[string]any)
}

// leafPaths lists the dotted paths of values' scalars, lists and empty objects.
func leafPaths(prefix string, v any) []string {
	m, ok := v.(map[string]any)
	if !ok || len(m) == 0 {
		return []string{prefix}
	}
	var out []string
	for k, x := range m {
		out = append(out, leafPaths(strings.TrimPrefix(prefix+"."+k, "."), x)...)
	}
	slices.Sort(out)
	return out
}

// lookup finds a dotted path in values or in a schema's properties.
func lookup(v any, path string, schema bool) (any, bool) {
	for _, k := range strings.Split(path, ".") {
		m, _ := v.(map[string]any)
		if schema {
			m, _ = m["properties"].(map[string]any)
		}
		var ok bool
		if v, ok = m[k]; !ok {
			return nil, false
		}
	}
	return v, true
}

// schemaType is a value's type as the README shows it.
func schemaType(s map[string]any) string {
	list := func(xs []any, format, sep string) string {
		parts := make([]string, len(xs))
		for i, x := range xs {
			parts[i] = fmt.Sprintf(format, x)
		}
		return strings.Join(parts, sep)
	}
	t := fmt.Sprint(s["type"])
	if types, ok := s["type"].([]any); ok {
		t = list(types, "%v", " or ")
	}
	if items, ok := s["items"].(map[string]any); ok {
		t = "list of " + fmt.Sprint(items["type"]) + "s"
	}
	if enum, ok := s["enum"].([]any); ok {
		t += ": " + list(enum, "`%v`", ", ")
	}
	return t
}

var valuesLine = regexp.MustCompile(`^( *)(?:(#) ?(.*)|([A-Za-z0-9_]+):)`)

// valuesTable is the rows of the README's table of values, from values.yaml's comments: a
// value with comment lines right above it (at its indentation) is documented by them, and so
// is everything under it. A row has the value, its schema's type, its default and the
// comment. It fails when a value has no comment or no schema.
func valuesTable(values string, schema map[string]any) (string, error) {
	var docs [][2]string // path, comment
	var path, comment []string
	commentIndent := -1
	for _, line := range strings.Split(values, "\n") {
		m := valuesLine.FindStringSubmatch(line)
		switch {
		case m == nil:
			comment = nil
		case m[2] != "": // a comment
			if len(m[1]) != commentIndent {
				comment, commentIndent = nil, len(m[1])
			}
			comment = append(comment, strings.TrimSpace(m[3]))
		default: // a key
			path = append(path[:min(len(m[1])/2, len(path))], m[4]) // values.yaml indents by 2
			if len(comment) > 0 && len(m[1]) == commentIndent {
				docs = append(docs, [2]string{strings.Join(path, "."), strings.Join(comment, " ")})
			}
			comment = nil
		}
	}
	var parsed map[string]any
	if err := yaml.Unmarshal([]byte(values), &parsed); err != nil {
		return "", err
	}
	for _, p := range leafPaths("", parsed) {
		if !slices.ContainsFunc(docs, func(d [2]string) bool { return p == d[0] || strings.HasPrefix(p, d[0]+".") }) {
			return "", fmt.Errorf("values.yaml: %s has no comment above it (nor above an object holding it)", p)
		}
	}
	var table strings.Builder
	for _, d := range docs {
		v, ok := lookup(parsed, d[0], false)
		if !ok {
			return "", fmt.Errorf("values.yaml: documented %s not found", d[0])
		}
		s, ok := lookup(schema, d[0], true)
		if !ok {
			return "", fmt.Errorf("values.schema.json has no %s", d[0])
		}
		def, err := json.Marshal(v)
		if err != nil {
			return "", err
		}
		// Escaped: what Markdown would read as a table cell's end or an HTML tag.
		meaning := strings.NewReplacer("|", `\|`, "<", "&lt;", ">", "&gt;").Replace(d[1])
		fmt.Fprintf(&table, "| `%s` | %s | `%s` | %s |\n", d[0], schemaType(s.(map[string]any)), def, meaning)
	}
	return table.String(), nil
}
