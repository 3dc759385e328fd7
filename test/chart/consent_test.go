package chart

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	mirrorsv1alpha1 "github.com/quartet-operator/quartet/api/mirrors/v1alpha1"
)

const aggregateLabelPrefix = "rbac.authorization.k8s.io/aggregate-to-"

// editorOrViewer matches the roles whose aggregation rbac.aggregateToBuiltinRoles and
// config/consent/no-aggregation turn off.
var editorOrViewer = regexp.MustCompile(`-(editor|viewer)-role$`)

// withoutAggregation checks that got is want minus the aggregate-to labels of the editor and
// viewer ClusterRoles, and nothing else; it returns how many labels were dropped.
func withoutAggregation(t *testing.T, want, got map[string]*unstructured.Unstructured) int {
	t.Helper()
	dropped := 0
	for _, o := range want {
		if o.GetKind() != "ClusterRole" || !editorOrViewer.MatchString(o.GetName()) {
			continue
		}
		labels, n := o.GetLabels(), dropped
		for k := range labels {
			if strings.HasPrefix(k, aggregateLabelPrefix) {
				delete(labels, k)
				dropped++
			}
		}
		if dropped > n {
			o.SetLabels(labels)
		}
	}
	for key, o := range got {
		for k := range o.GetLabels() {
			assert.NotContains(t, k, aggregateLabelPrefix, key)
		}
	}
	sameObjects(t, want, got)
	return dropped
}

// TestChartAggregationOff: rbac.aggregateToBuiltinRoles=false drops the aggregate-to labels
// from every editor and viewer role (seven roles, two labels each: the ChaosAgent editor
// has none) and changes nothing else.
func TestChartAggregationOff(t *testing.T) {
	helm, _ := tools(t)
	assert.Equal(t, 14, withoutAggregation(t, render(t, helm), render(t, helm, "--set", "rbac.aggregateToBuiltinRoles=false")))
}

// consentValues asks for two platform ServiceAccounts and two grants, one with every default.
const consentValues = `copyrator:
  platformServiceAccounts:
  - namespace: platform
  - namespace: team-a
    name: copy-sync
registryMirror:
  hostGrants:
  - host: docker.io
    mirror: {namespace: registry-mirrors, name: docker-hub}
  - name: internal
    host: registry.example.com:5000
    mirror: {namespace: registry-mirrors, name: internal}
    capabilities: [pull, resolve]
    allowCredentials: true
    allowPlainHTTP: true
`

func writeValues(t *testing.T, values string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "values.yaml")
	require.NoError(t, os.WriteFile(path, []byte(values), 0o644))
	return path
}

// TestChartConsent: copyrator.platformServiceAccounts renders one ClusterRoleBinding of
// quartet-copyrator-target per entry (name defaulting to copyrator), registryMirror.hostGrants
// one RegistryHostGrant per entry (capabilities defaulting to [pull]); both equal what
// config/consent makes for the same input, helm lint stays clean, and nothing else changes.
func TestChartConsent(t *testing.T) {
	helm, kustomize := tools(t)
	values := writeValues(t, consentValues)
	lintClean(t, helm, "-f", values)

	plain := render(t, helm)
	consent := map[string]*unstructured.Unstructured{}
	for key, o := range render(t, helm, "-f", values) {
		if plain[key] == nil {
			consent[key] = o
		} else {
			assert.Equal(t, plain[key].Object, o.Object, "%s changed", key)
		}
	}
	require.ElementsMatch(t, []string{
		"ClusterRoleBinding//quartet-copyrator-platform-platform-copyrator", "ClusterRoleBinding//quartet-copyrator-platform-team-a-copy-sync",
		"RegistryHostGrant//docker.io", "RegistryHostGrant//internal",
	}, keys(consent))
	require.NotNil(t, plain["ClusterRole//quartet-copyrator-target"], "the bindings' role is in the chart")

	for key, sa := range map[string]string{
		"ClusterRoleBinding//quartet-copyrator-platform-platform-copyrator": "platform/copyrator",
		"ClusterRoleBinding//quartet-copyrator-platform-team-a-copy-sync":   "team-a/copy-sync",
	} {
		ref, _, _ := unstructured.NestedStringMap(consent[key].Object, "roleRef")
		assert.Equal(t, map[string]string{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "quartet-copyrator-target"}, ref, key)
		subjects, _, _ := unstructured.NestedSlice(consent[key].Object, "subjects")
		ns, name, _ := strings.Cut(sa, "/")
		assert.Equal(t, []any{map[string]any{"kind": "ServiceAccount", "namespace": ns, "name": name}}, subjects, key)
	}

	assert.Equal(t, mirrorsv1alpha1.RegistryHostGrantSpec{
		Host: "docker.io", Mirror: mirrorsv1alpha1.MirrorReference{Namespace: "registry-mirrors", Name: "docker-hub"},
		Capabilities: []mirrorsv1alpha1.Capability{mirrorsv1alpha1.CapabilityPull},
	}, grantSpec(t, consent["RegistryHostGrant//docker.io"]))
	assert.Equal(t, mirrorsv1alpha1.RegistryHostGrantSpec{
		Host: "registry.example.com:5000", Mirror: mirrorsv1alpha1.MirrorReference{Namespace: "registry-mirrors", Name: "internal"},
		Capabilities:     []mirrorsv1alpha1.Capability{mirrorsv1alpha1.CapabilityPull, mirrorsv1alpha1.CapabilityResolve},
		AllowCredentials: true, AllowPlainHTTP: true,
	}, grantSpec(t, consent["RegistryHostGrant//internal"]))

	// The same consents through config/consent: the example grant is the first entry, and
	// copy-everywhere, its namespace and ServiceAccount set, makes the same bindings.
	grant := objects(t, run(t, kustomize, "build", "config/consent/registry-host-grant"))
	sameObject(t, consent["RegistryHostGrant//docker.io"], grant["RegistryHostGrant//docker.io"])
	for key, b := range consent {
		if b.GetKind() == "ClusterRoleBinding" {
			subjects, _, _ := unstructured.NestedSlice(b.Object, "subjects")
			s := subjects[0].(map[string]any)
			sameObject(t, b, objects(t, copyEverywhere(t, kustomize, s["namespace"].(string), s["name"].(string)))[key])
		}
	}
}

// sameObject compares a chart's object with kustomize's, who manages them aside.
func sameObject(t *testing.T, chart, kustomized *unstructured.Unstructured) {
	t.Helper()
	require.NotNil(t, chart)
	require.NotNil(t, kustomized, "kustomize makes no %s %s", chart.GetKind(), chart.GetName())
	normalize(t, chart)
	normalize(t, kustomized)
	assert.Equal(t, kustomized.Object, chart.Object)
}

// grantSpec decodes a RegistryHostGrant's spec strictly: a field the API does not know fails.
func grantSpec(t *testing.T, o *unstructured.Unstructured) mirrorsv1alpha1.RegistryHostGrantSpec {
	t.Helper()
	require.NotNil(t, o)
	assert.Equal(t, "mirrors.quartet.dev/v1alpha1", o.GetAPIVersion())
	var g mirrorsv1alpha1.RegistryHostGrant
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, &g, true), o.GetName())
	return g.Spec
}

// TestChartConsentNamesWhatIsMissing: an entry without a required field fails the render
// with the value's path: values.schema.json refuses it, and where the schema is skipped
// (--skip-schema-validation) the template's own required check does.
func TestChartConsentNamesWhatIsMissing(t *testing.T) {
	helm, _ := tools(t)
	for _, c := range []struct{ values, schema, template string }{
		{"copyrator: {platformServiceAccounts: [{name: sync}]}",
			"at '/copyrator/platformServiceAccounts/0': missing property 'namespace'", "copyrator.platformServiceAccounts[0].namespace is required"},
		{"registryMirror: {hostGrants: [{mirror: {namespace: m, name: hub}}]}",
			"at '/registryMirror/hostGrants/0': missing property 'host'", "registryMirror.hostGrants[0].host is required"},
		{"registryMirror: {hostGrants: [{host: ghcr.io, mirror: {name: hub}}]}",
			"at '/registryMirror/hostGrants/0/mirror': missing property 'namespace'", "registryMirror.hostGrants[0].mirror.namespace is required"},
		{"registryMirror: {hostGrants: [{host: a.io, mirror: {namespace: m, name: hub}}, {host: ghcr.io}]}",
			"at '/registryMirror/hostGrants/1': missing property 'mirror'", "registryMirror.hostGrants[1].mirror.namespace is required"},
	} {
		file := writeValues(t, c.values)
		_, err := tryRun(helm, "template", "quartet", "charts/quartet", "-f", file)
		require.Error(t, err, c.values)
		assert.Contains(t, err.Error(), c.schema, c.values)
		_, err = tryRun(helm, "template", "quartet", "charts/quartet", "-f", file, "--skip-schema-validation")
		require.Error(t, err, c.values)
		assert.Contains(t, err.Error(), c.template, c.values)
	}
}

// copyEverywhere builds config/consent/copy-everywhere with its one place (the generator's
// literals) set to namespace and serviceAccountName, as an admin edits it.
func copyEverywhere(t *testing.T, kustomize, namespace, serviceAccountName string) []byte {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.CopyFS(dir, os.DirFS("../../config/consent/copy-everywhere")))
	s := string(read(t, "config/consent/copy-everywhere/kustomization.yaml"))
	for _, r := range [][2]string{
		{"- namespace=platform ", "- namespace=" + namespace + " "}, {"- serviceAccountName=copyrator ", "- serviceAccountName=" + serviceAccountName + " "},
	} {
		require.Contains(t, s, r[0], "the one place to edit in config/consent/copy-everywhere")
		s = strings.Replace(s, r[0], r[1], 1)
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(s), 0o644))
	return run(t, kustomize, "build", dir)
}

// TestConsentKustomizations: each directory of config/consent renders what docs/INSTALL.md
// says: copy-everywhere one ClusterRoleBinding of the ClusterRole config/default installs,
// named and bound after the namespace and ServiceAccount set in one place (the generator's
// ConfigMap is not output); registry-host-grant one valid grant that needs nothing but pull;
// default-without-aggregation config/default minus the aggregate-to labels of the editor and
// viewer roles.
func TestConsentKustomizations(t *testing.T) {
	_, kustomize := tools(t)
	config := run(t, kustomize, "build", "config/default")
	installed := objects(t, config)

	for _, c := range []struct{ namespace, sa, want string }{
		{"platform", "copyrator", "quartet-copyrator-platform-platform-copyrator"},
		{"team-a", "copy-sync", "quartet-copyrator-platform-team-a-copy-sync"}, // dashes in both
	} {
		built := objects(t, copyEverywhere(t, kustomize, c.namespace, c.sa))
		require.Equal(t, []string{"ClusterRoleBinding//" + c.want}, keys(built))
		b := built["ClusterRoleBinding//"+c.want]
		ref, _, _ := unstructured.NestedStringMap(b.Object, "roleRef")
		assert.Equal(t, "ClusterRole", ref["kind"])
		require.NotNil(t, installed["ClusterRole//"+ref["name"]], "roleRef %s is installed by config/default", ref["name"])
		subjects, _, _ := unstructured.NestedSlice(b.Object, "subjects")
		assert.Equal(t, []any{map[string]any{"kind": "ServiceAccount", "namespace": c.namespace, "name": c.sa}}, subjects)
	}
	// As shipped, built in place (kubectl apply -k uses the same kustomization).
	shipped := objects(t, run(t, kustomize, "build", "config/consent/copy-everywhere"))
	assert.Equal(t, []string{"ClusterRoleBinding//quartet-copyrator-platform-platform-copyrator"}, keys(shipped))

	grants := objects(t, run(t, kustomize, "build", "config/consent/registry-host-grant"))
	require.Equal(t, []string{"RegistryHostGrant//docker.io"}, keys(grants))
	assert.Equal(t, []mirrorsv1alpha1.Capability{mirrorsv1alpha1.CapabilityPull}, grantSpec(t, grants["RegistryHostGrant//docker.io"]).Capabilities)
	require.NotNil(t, installed["CustomResourceDefinition//registryhostgrants.mirrors.quartet.dev"])

	off := objects(t, run(t, kustomize, "build", "config/consent/default-without-aggregation"))
	assert.Equal(t, 14, withoutAggregation(t, objects(t, config), off))
}

// TestChartWithoutTheNewValues: `helm upgrade --reuse-values` of a release made by a chart
// without rbac, serviceAccount, copyrator and registryMirror renders with its old values
// alone (values.schema.json requires none of them); the chart then renders what its defaults
// render (RBAC and ServiceAccount created, aggregation on, no consents) instead of failing.
func TestChartWithoutTheNewValues(t *testing.T) {
	helm, _ := tools(t)
	dir := filepath.Join(t.TempDir(), "quartet")
	require.NoError(t, os.CopyFS(dir, os.DirFS(chartDir)))
	values := string(read(t, "charts/quartet/values.yaml"))
	start, end := strings.Index(values, "\nrbac:\n"), strings.Index(values, "\ncrds:\n")
	require.True(t, start > 0 && end > start, "values.yaml has rbac, serviceAccount, copyrator and registryMirror before crds")
	old := values[:start] + values[end:]
	for _, v := range []string{"aggregateToBuiltinRoles", "serviceAccount:", "copyrator:", "registryMirror:"} {
		require.NotContains(t, old, v)
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "values.yaml"), []byte(old), 0o644))
	sameObjects(t, render(t, helm), objects(t, run(t, helm, "template", "quartet", dir, "--namespace", "quartet-system")))
}
