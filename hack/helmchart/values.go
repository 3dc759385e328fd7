package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// valuesYAML is values.yaml without its header. Every value has a comment right above it
// (or above an object whose content is free-form, like resources): readmeMarkdown turns the
// comments into the README's table and fails on a value without one.
func valuesYAML(image, version, registryImage string, resources map[string]any) (string, error) {
	res, err := yaml.Marshal(map[string]any{"resources": resources})
	if err != nil {
		return "", err
	}
	return fmt.Sprintf(`image:
  # The operator image; every RegistryMirror's node agent runs it too.
  repository: %s
  # The operator image's tag.
  tag: v%s
  # When the kubelet pulls the operator image.
  pullPolicy: IfNotPresent
# The registry image every RegistryMirror runs: mirror-registry, the CNCF distribution
# registry with retention by use, of the operator's version (mirror it for air-gapped
# clusters). The node agent runs the operator's own image.
registryImage: %s
# Manager replicas; more than one needs leaderElection.enabled.
replicaCount: 1
# Resources of the manager container.
%s
# Namespaces the manager acts in, comma-separated; empty: every namespace.
watchNamespace: ""
leaderElection:
  # Elect one active manager (--leader-elect); needed with more than one replica.
  enabled: true
metrics:
  # Serve /metrics over HTTPS on :8443 to callers bound to the quartet-metrics-reader
  # ClusterRole, and create the metrics Service.
  enabled: true
# More manager flags, for example [--controllers=copyratorrule,exchangerate].
extraArgs: []
# More environment variables of the manager; any flag can be set as QUARTET_<FLAG>.
extraEnv: []
rbac:
  # Create the manager's ClusterRole, Role and bindings, the CRs' editor and viewer roles,
  # quartet-copyrator-target and quartet-metrics-reader. false: no RBAC object at all; make
  # them yourself (config/rbac) for the manager's ServiceAccount, and leave
  # copyrator.platformServiceAccounts empty.
  create: true
  # Label the quartet-*-editor-role and -viewer-role ClusterRoles to aggregate into the
  # built-in admin, edit and view roles, so namespace owners can use the CRs (the ChaosAgent
  # editor role never is). false: no aggregation; bind those ClusterRoles yourself.
  aggregateToBuiltinRoles: true
serviceAccount:
  # Create the manager's ServiceAccount. false: it must exist in the release's namespace.
  create: true
  # The manager's ServiceAccount; empty: quartet-controller-manager.
  name: ""
copyrator:
  # ServiceAccounts whose CopyratorRules may copy into every namespace: a ClusterRoleBinding
  # quartet-copyrator-platform-<namespace>-<name> to quartet-copyrator-target each, e.g.
  # [{namespace: platform}]; name defaults to copyrator, the rules' default
  # spec.serviceAccountName. Protected namespaces (kube-system, ...) still need the label
  # copyrator.flant.com/accept-copies=true.
  platformServiceAccounts: []
registryMirror:
  # RegistryHostGrants: which RegistryMirror may configure every node for which registry host,
  # e.g. [{host: docker.io, mirror: {namespace: registry-mirrors, name: docker-hub}}]. name
  # defaults to host (":" as "-"), capabilities to [pull] (add resolve to trust the mirror with
  # tags), allowCredentials and allowPlainHTTP to false. Helm cannot create them in the install
  # or upgrade that first brings the RegistryHostGrant CRD: set them in a later helm upgrade.
  hostGrants: []
crds:
  # Install and upgrade the CRDs with the chart.
  install: true
  # Keep the CRDs (and so every ChaosAgent, CopyratorRule, ExchangeRate, RegistryMirror and
  # RegistryHostGrant) when the release is uninstalled.
  keep: true
# Node selector of the manager pod.
nodeSelector: {}
# Tolerations of the manager pod.
tolerations: []
# Affinity of the manager pod.
affinity: {}
`, image, version, registryImage, strings.TrimSpace(string(res))), nil
}

// Patterns of Kubernetes names, as the API server checks them.
const (
	dnsLabel     = `^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	dnsSubdomain = `^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
)

// schemaTemplate is values.schema.json but for the RegistryHostGrant entries, whose rules
// valuesSchema takes from that CRD. Every object is closed (additionalProperties: false), so
// a misspelt value is refused, not ignored; "global" is what a parent chart passes down. No
// top-level value is required: `helm upgrade --reuse-values` of a release made by an older
// chart validates its old values, which lack the newer ones. JSON Schema draft-07, which Helm 3
// (both its validators) and Helm 4 read.
var schemaTemplate = map[string]any{
	"$schema":              "http://json-schema.org/draft-07/schema#",
	"title":                "Values of the Quartet chart",
	"type":                 "object",
	"additionalProperties": false,
	"properties": map[string]any{
		"global": map[string]any{"type": "object", "description": "Values a parent chart passes to its subcharts; unused."},
		"image": closed(map[string]any{
			"repository": map[string]any{"type": "string", "minLength": 1},
			"tag":        map[string]any{"type": "string", "minLength": 1},
			"pullPolicy": map[string]any{"type": "string", "enum": []any{"Always", "IfNotPresent", "Never"}},
		}),
		"registryImage": map[string]any{"type": "string", "minLength": 1},
		"replicaCount":  map[string]any{"type": "integer", "minimum": 0},
		"resources": closed(map[string]any{
			"limits":   quantities(),
			"requests": quantities(),
			"claims":   map[string]any{"type": "array", "items": map[string]any{"type": "object"}},
		}),
		"watchNamespace": map[string]any{"type": "string",
			"pattern": `^\s*([a-z0-9]([-a-z0-9]*[a-z0-9])?)?(\s*,\s*([a-z0-9]([-a-z0-9]*[a-z0-9])?)?)*\s*$`},
		"leaderElection": closed(map[string]any{"enabled": map[string]any{"type": "boolean"}}),
		"metrics":        closed(map[string]any{"enabled": map[string]any{"type": "boolean"}}),
		"extraArgs":      map[string]any{"type": "array", "items": map[string]any{"type": "string", "minLength": 1}},
		"extraEnv": map[string]any{"type": "array", "items": required(closed(map[string]any{
			"name":      map[string]any{"type": "string", "minLength": 1},
			"value":     map[string]any{"type": "string"},
			"valueFrom": map[string]any{"type": "object"},
		}), "name")},
		"rbac": closed(map[string]any{
			"create":                  map[string]any{"type": "boolean"},
			"aggregateToBuiltinRoles": map[string]any{"type": "boolean"},
		}),
		"serviceAccount": closed(map[string]any{
			"create": map[string]any{"type": "boolean"},
			"name":   map[string]any{"type": "string", "maxLength": 253, "pattern": `^$|` + dnsSubdomain},
		}),
		"copyrator": closed(map[string]any{
			"platformServiceAccounts": map[string]any{"type": "array", "items": required(closed(map[string]any{
				"namespace": map[string]any{"type": "string", "maxLength": 63, "pattern": dnsLabel},
				"name":      map[string]any{"type": "string", "maxLength": 253, "pattern": dnsSubdomain},
			}), "namespace")},
		}),
		"registryMirror": closed(map[string]any{
			"hostGrants": map[string]any{"type": "array", "items": "__GRANT__"},
		}),
		"crds": closed(map[string]any{
			"install": map[string]any{"type": "boolean"},
			"keep":    map[string]any{"type": "boolean"},
		}),
		"nodeSelector": map[string]any{"type": "object", "additionalProperties": map[string]any{"type": "string"}},
		"tolerations":  map[string]any{"type": "array", "items": map[string]any{"type": "object"}},
		"affinity":     map[string]any{"type": "object"},
	},
}

func closed(properties map[string]any) map[string]any {
	return map[string]any{"type": "object", "additionalProperties": false, "properties": properties}
}

func required(schema map[string]any, fields ...string) map[string]any {
	schema["required"] = fields
	return schema
}

// quantities: resource names to quantities, "500m" or 1.
func quantities() map[string]any {
	return map[string]any{"type": "object", "additionalProperties": map[string]any{"type": []any{"string", "number"}}}
}

// valuesSchema is values.schema.json. A registryMirror.hostGrants entry is a
// RegistryHostGrant's spec (the CRD's own rules: required fields, patterns, lengths, the
// capabilities' enum) plus the grant's name.
func valuesSchema(grantSpec map[string]any) (string, error) {
	grant, ok := jsonSchemaOf(grantSpec).(map[string]any)
	if !ok {
		return "", errors.New("the RegistryHostGrant CRD's spec schema is not an object")
	}
	props, _ := grant["properties"].(map[string]any)
	if props == nil || props["host"] == nil || props["mirror"] == nil {
		return "", errors.New("the RegistryHostGrant CRD's spec has no host or mirror")
	}
	props["name"] = map[string]any{"type": "string", "maxLength": 253, "pattern": dnsSubdomain,
		"description": "name of the RegistryHostGrant; default: host with \":\" as \"-\"."}
	// What the CRD says in CEL and x-kubernetes-list-type: capabilities are a set with pull.
	caps, _ := props["capabilities"].(map[string]any)
	if caps == nil {
		return "", errors.New("the RegistryHostGrant CRD's spec has no capabilities")
	}
	caps["uniqueItems"] = true
	caps["contains"] = map[string]any{"const": "pull"}
	grant["additionalProperties"] = false
	grant["description"] = "A RegistryHostGrant: its spec, and its name."
	grant["required"] = []any{"host", "mirror"}
	// Deep-copy the template by a JSON round trip, then put the grant in.
	b, err := json.Marshal(schemaTemplate)
	if err != nil {
		return "", err
	}
	var schema map[string]any
	if err := json.Unmarshal(b, &schema); err != nil {
		return "", err
	}
	rm := schema["properties"].(map[string]any)["registryMirror"].(map[string]any)["properties"].(map[string]any)
	rm["hostGrants"].(map[string]any)["items"] = grant
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(schema); err != nil {
		return "", err
	}
	return out.String(), nil
}

// jsonSchemaKeywords are the OpenAPI keywords of a CRD schema that mean the same in JSON
// Schema; the rest (default, x-kubernetes-*, CEL rules) is left out.
var jsonSchemaKeywords = []string{"type", "description", "properties", "items", "required", "enum", "pattern",
	"minLength", "maxLength", "minItems", "maxItems", "minimum", "maximum", "format"}

func jsonSchemaOf(v any) any {
	m, ok := v.(map[string]any)
	if !ok {
		return v
	}
	out := map[string]any{}
	for _, k := range jsonSchemaKeywords {
		x, ok := m[k]
		if !ok {
			continue
		}
		switch k {
		case "properties":
			props := map[string]any{}
			for name, p := range x.(map[string]any) {
				props[name] = jsonSchemaOf(p)
			}
			out[k] = props
		case "items":
			out[k] = jsonSchemaOf(x)
		default:
			out[k] = x
		}
	}
	if out["type"] == "object" && out["properties"] != nil {
		out["additionalProperties"] = false
	}
	return out
}

// valueDoc is one row of the README's table: a value with a comment above it in values.yaml.
type valueDoc struct {
	path, description string
}

var (
	keyLine     = regexp.MustCompile(`^( *)([A-Za-z0-9_]+):(.*)$`)
	commentLine = regexp.MustCompile(`^( *)# ?(.*)$`)
)

// documentedValues reads values.yaml's comments: each key with comment lines right above it
// (at its indentation) is documented by them, and so is everything under it.
func documentedValues(values string) ([]valueDoc, error) {
	type level struct {
		indent int
		key    string
	}
	var stack []level
	var comment []string
	commentIndent := -1
	var out []valueDoc
	for _, line := range strings.Split(values, "\n") {
		if m := commentLine.FindStringSubmatch(line); m != nil {
			if commentIndent != len(m[1]) {
				comment, commentIndent = nil, len(m[1])
			}
			comment = append(comment, strings.TrimSpace(m[2]))
			continue
		}
		m := keyLine.FindStringSubmatch(line)
		if m == nil {
			comment, commentIndent = nil, -1
			continue
		}
		indent := len(m[1])
		for len(stack) > 0 && stack[len(stack)-1].indent >= indent {
			stack = stack[:len(stack)-1]
		}
		stack = append(stack, level{indent, m[2]})
		if len(comment) > 0 && commentIndent == indent {
			var path []string
			for _, l := range stack {
				path = append(path, l.key)
			}
			out = append(out, valueDoc{strings.Join(path, "."), strings.Join(comment, " ")})
		}
		comment, commentIndent = nil, -1
	}
	return out, nil
}

// leafPaths lists the dotted paths of values' scalars, lists and empty objects.
func leafPaths(prefix string, v any) []string {
	m, ok := v.(map[string]any)
	if !ok || len(m) == 0 {
		return []string{prefix}
	}
	var out []string
	for k, x := range m {
		p := k
		if prefix != "" {
			p = prefix + "." + k
		}
		out = append(out, leafPaths(p, x)...)
	}
	sort.Strings(out)
	return out
}

// lookup finds a dotted path in values or in a schema's properties.
func lookup(v any, path string, schema bool) (any, bool) {
	for _, k := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if schema && ok {
			m, ok = m["properties"].(map[string]any)
		}
		if !ok {
			return nil, false
		}
		if v, ok = m[k]; !ok {
			return nil, false
		}
	}
	return v, true
}

// coveredBy returns the documented value that path is, or is under.
func coveredBy(docs []valueDoc, path string) (valueDoc, bool) {
	for _, d := range docs {
		if d.path == path || strings.HasPrefix(path, d.path+".") {
			return d, true
		}
	}
	return valueDoc{}, false
}

// schemaType is a value's type as the README shows it.
func schemaType(s map[string]any) string {
	t := fmt.Sprint(s["type"])
	if list, ok := s["type"].([]any); ok {
		var parts []string
		for _, x := range list {
			parts = append(parts, fmt.Sprint(x))
		}
		t = strings.Join(parts, " or ")
	}
	if items, ok := s["items"].(map[string]any); ok {
		t = "list of " + fmt.Sprint(items["type"]) + "s"
	}
	if enum, ok := s["enum"].([]any); ok {
		var parts []string
		for _, x := range enum {
			parts = append(parts, fmt.Sprintf("`%v`", x))
		}
		t += ": " + strings.Join(parts, ", ")
	}
	return t
}

// readmeMarkdown is the chart's README.md: what it installs, the commands, the admin's
// consents, and a table of every value (from values.yaml's comments, its defaults and the
// schema's types). It fails when a value has no comment or no schema.
func readmeMarkdown(values, schemaJSON, serviceAccount string) (string, error) {
	docs, err := documentedValues(values)
	if err != nil {
		return "", err
	}
	var parsed map[string]any
	if err := yaml.Unmarshal([]byte(values), &parsed); err != nil {
		return "", err
	}
	var schema map[string]any
	if err := json.Unmarshal([]byte(schemaJSON), &schema); err != nil {
		return "", err
	}
	for _, p := range leafPaths("", parsed) {
		if _, ok := coveredBy(docs, p); !ok {
			return "", fmt.Errorf("values.yaml: %s has no comment above it (nor above an object holding it)", p)
		}
	}
	var table strings.Builder
	table.WriteString("| value | type | default | meaning |\n|---|---|---|---|\n")
	for _, d := range docs {
		v, ok := lookup(parsed, d.path, false)
		if !ok {
			return "", fmt.Errorf("values.yaml: documented %s not found", d.path)
		}
		s, ok := lookup(schema, d.path, true)
		if !ok {
			return "", fmt.Errorf("values.schema.json has no %s", d.path)
		}
		def, err := json.Marshal(v)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&table, "| `%s` | %s | `%s` | %s |\n", d.path, schemaType(s.(map[string]any)), def, markdownText(d.description))
	}
	return fmt.Sprintf(readmeTemplate, table.String(), serviceAccount), nil
}

// markdownText escapes what Markdown would read as a table cell's end or an HTML tag.
func markdownText(s string) string {
	return strings.NewReplacer("|", `\|`, "<", "&lt;", ">", "&gt;").Replace(s)
}

// readmeTemplate: %[1]s is the values table, %[2]s the manager's ServiceAccount.
const readmeTemplate = `<!-- Generated by ` + "`make helm`" + ` (hack/helmchart) from config/ and values.yaml's comments; edit those and regenerate. -->
# Quartet

Quartet is one Kubernetes operator that runs four day-2 controllers in a single manager:

| kind | what it does |
|---|---|
| ` + "`ChaosAgent`" + ` (blackadder.io) | Chaos engineering: kills pods above a tolerance, doubles Deployment replicas, fills ConfigMaps with lorem ipsum — paced, bounded, explained and undone. |
| ` + "`CopyratorRule`" + ` (flant.com) | Copies labelled ConfigMaps or Secrets of its namespace into other namespaces and keeps the copies in sync. |
| ` + "`ExchangeRate`" + ` (operators.brennerm.github.io) | Keeps a currency's exchange rate in a ConfigMap, from the ECB reference rates. |
| ` + "`RegistryMirror`" + `, ` + "`RegistryHostGrant`" + ` (mirrors.quartet.dev) | A pull-through image cache per upstream registry, on the nodes only where a cluster admin grants it. |

The chart is generated from the same ` + "`config/`" + ` that ` + "`make deploy`" + ` and the OLM bundle are made from: its
objects are the CRDs, the RBAC and the manager Deployment of ` + "`kustomize build config/default`" + `, with values.

## Install, upgrade, uninstall

Kubernetes 1.31 or later. The manager runs under the Pod Security Standard ` + "`restricted`" + ` and OpenShift's
` + "`restricted-v2`" + ` (it names no UID).

` + "```sh" + `
helm install quartet charts/quartet -n quartet-system --create-namespace
helm upgrade quartet charts/quartet -n quartet-system --reset-then-reuse-values
helm uninstall quartet -n quartet-system
` + "```" + `

The CRDs are templates, not the chart's ` + "`crds/`" + ` folder, so ` + "`helm upgrade`" + ` upgrades them; with
` + "`crds.keep`" + ` (the default) they stay on uninstall, and with them every CR. Delete your ChaosAgents and
CopyratorRules before uninstalling, while the manager runs: their finalizers put back what chaos changed and
remove the copies. What stays after ` + "`helm uninstall`" + `: the five CRDs and the namespace.

values.schema.json refuses a wrong value (a misspelt name, a wrong type, a consent entry without its
required fields) before anything is installed.

## A cluster admin's consents

What reaches beyond a CR's own namespace needs someone who may write there to agree. Both are values,
given in the release like the rest:

` + "```yaml" + `
# consent.yaml
copyrator:
  platformServiceAccounts:
  - namespace: platform            # its rules, acting as copyrator, may copy into every namespace
registryMirror:
  hostGrants:
  - host: docker.io                # add capabilities: [pull, resolve] to trust the mirror with tags
    mirror: {namespace: registry-mirrors, name: docker-hub}
` + "```" + `

` + "`helm upgrade quartet charts/quartet -n quartet-system --reset-then-reuse-values -f consent.yaml`" + `.
Helm cannot create a grant in the install or upgrade that first brings the RegistryHostGrant CRD: give
` + "`registryMirror.hostGrants`" + ` in a later upgrade. The editor and viewer roles aggregate into ` + "`admin`" + `,
` + "`edit`" + ` and ` + "`view`" + ` unless ` + "`rbac.aggregateToBuiltinRoles=false`" + `.

With ` + "`rbac.create=false`" + ` the chart makes no Role, ClusterRole or binding at all: make the manager's
(` + "`config/rbac`" + `) for its ServiceAccount (` + "`%[2]s`" + ` unless ` + "`serviceAccount.name`" + `) yourself.

## Values

%[1]s
## More

- [README](https://github.com/quartet-operator/quartet/blob/main/README.md): the four kinds and their samples
- [Installing, upgrading and removing](https://github.com/quartet-operator/quartet/blob/main/docs/INSTALL.md) (Helm, OLM, kustomize)
- [Security](https://github.com/quartet-operator/quartet/blob/main/docs/SECURITY.md): permissions, consents, pod security
- [Metrics and alerts](https://github.com/quartet-operator/quartet/blob/main/docs/METRICS.md)

Licensed under the Apache License 2.0.
`
