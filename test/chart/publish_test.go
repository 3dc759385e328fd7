package chart

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

const chartDir = "../../charts/quartet"

// TestChartSchemaRefusesWrongValues: helm install and helm template refuse a value of the
// wrong type, outside its enum or pattern, misspelt, or a consent entry with a wrong field,
// and the error names the value (values.schema.json); nothing is rendered or installed.
func TestChartSchemaRefusesWrongValues(t *testing.T) {
	helm, _ := tools(t)
	set := func(v string) []string { return []string{"--set", v} }
	// grant is a values file with one host grant, entry its fields.
	grant := func(entry string) []string {
		return []string{"-f", writeValues(t, "registryMirror: {hostGrants: [{"+entry+"}]}")}
	}
	const hub = "host: docker.io, mirror: {namespace: m, name: hub}"
	for _, c := range []struct {
		args []string
		want string
	}{
		{set("replicaCount=two"), "at '/replicaCount': got string, want integer"},
		{set("replicaCount=-1"), "at '/replicaCount'"},
		{set("image.pullPolicy=Sometimes"), "at '/image/pullPolicy': value must be one of 'Always', 'IfNotPresent', 'Never'"},
		{set("image.tag="), "at '/image/tag'"},
		{set("leaderElection.enabled=yes"), "at '/leaderElection/enabled': got string, want boolean"},
		{set("rbac.create=no"), "at '/rbac/create': got string, want boolean"},
		{set("serviceAccount.name=Not_A_Name"), "at '/serviceAccount/name'"},
		{set("watchNamespace=Team A"), "at '/watchNamespace'"},
		{set("replicas=2"), "additional properties 'replicas' not allowed"},
		{set("metrics.enable=false"), "at '/metrics': additional properties 'enable' not allowed"},
		{set("extraArgs[0]=1"), "at '/extraArgs/0': got number, want string"},
		{set("extraEnv[0].value=x"), "at '/extraEnv/0': missing property 'name'"},
		{set("nodeSelector.disk=1"), "at '/nodeSelector/disk'"},
		{set("copyrator.platformServiceAccounts[0].namespace=Platform"), "at '/copyrator/platformServiceAccounts/0/namespace'"},
		{set("copyrator.platformServiceAccounts[0].namespace=p,copyrator.platformServiceAccounts[0].nmae=x"),
			"at '/copyrator/platformServiceAccounts/0': additional properties 'nmae' not allowed"},
		{grant(hub + ", capabilities: [push]"), "at '/registryMirror/hostGrants/0/capabilities/0': value must be one of 'pull', 'resolve'"},
		{grant(hub + ", capabilities: [resolve]"), "at '/registryMirror/hostGrants/0/capabilities'"},
		{grant("host: _default, mirror: {namespace: m, name: hub}"), "at '/registryMirror/hostGrants/0/host'"},
		{grant(hub + `, allowCredentials: "yes"`), "at '/registryMirror/hostGrants/0/allowCredentials': got string, want boolean"},
		{grant("host: docker.io, mirror: {namespace: m, name: hub, kind: RegistryMirror}"), "at '/registryMirror/hostGrants/0/mirror': additional properties 'kind' not allowed"},
	} {
		out, err := tryRun(helm, append([]string{"template", "quartet", "charts/quartet", "-n", "quartet-system"}, c.args...)...)
		require.Error(t, err, "%v rendered:\n%.300s", c.args, out)
		assert.Contains(t, err.Error(), c.want, "%v", c.args)
		assert.Contains(t, err.Error(), "values don't meet the specifications of the schema", "%v", c.args)
	}
	// helm install refuses the same way, before it talks to any cluster.
	_, err := tryRun(helm, "install", "quartet", "charts/quartet", "-n", "quartet-system", "--dry-run=client", "--set", "image.pullPolicy=Sometimes")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "at '/image/pullPolicy'")
	// And right values pass, the schema's own examples among them.
	for _, v := range []string{"image.pullPolicy=Always", "watchNamespace=team-a\\, team-b", "serviceAccount.name=quartet.sa",
		"resources.limits.cpu=2", "extraEnv[0].name=A,extraEnv[0].value=b", "global.x=1"} {
		run(t, helm, "template", "quartet", "charts/quartet", "-n", "quartet-system", "--set", v)
	}
}

// TestChartRBACAndServiceAccount: rbac.create=false renders no Role, ClusterRole or binding
// and nothing else differs (consent bindings are then refused, naming both values);
// serviceAccount.create=false renders no ServiceAccount; serviceAccount.name renames the
// ServiceAccount, the Deployment's and every binding's reference to it, and nothing else.
func TestChartRBACAndServiceAccount(t *testing.T) {
	helm, _ := tools(t)
	plain := render(t, helm)
	noRBAC := maps.Clone(plain)
	maps.DeleteFunc(noRBAC, func(_ string, o *unstructured.Unstructured) bool {
		return slices.Contains([]string{"Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"}, o.GetKind())
	})
	assert.Len(t, noRBAC, len(plain)-14, "11 ClusterRoles, a Role and two bindings")
	sameObjects(t, noRBAC, render(t, helm, "--set", "rbac.create=false"))
	_, err := tryRun(helm, "template", "quartet", "charts/quartet", "--set", "rbac.create=false,copyrator.platformServiceAccounts[0].namespace=platform")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "copyrator.platformServiceAccounts: rbac.create=false")

	require.NotNil(t, plain["ServiceAccount/quartet-system/quartet-controller-manager"])
	noSA := maps.Clone(plain)
	maps.DeleteFunc(noSA, func(_ string, o *unstructured.Unstructured) bool { return o.GetKind() == "ServiceAccount" })
	assert.Len(t, noSA, len(plain)-1)
	sameObjects(t, noSA, render(t, helm, "--set", "serviceAccount.create=false"))

	named := render(t, helm, "--set", "serviceAccount.name=quartet-sa")
	require.NotNil(t, named["ServiceAccount/quartet-system/quartet-sa"])
	renamed := 0
	for key, o := range plain {
		want := o.DeepCopy()
		switch o.GetKind() {
		case "ServiceAccount":
			want.SetName("quartet-sa")
			key = "ServiceAccount/quartet-system/quartet-sa"
			renamed++
		case "Deployment":
			require.NoError(t, unstructured.SetNestedField(want.Object, "quartet-sa", "spec", "template", "spec", "serviceAccountName"))
			renamed++
		case "RoleBinding", "ClusterRoleBinding":
			subjects, _, _ := unstructured.NestedSlice(want.Object, "subjects")
			for _, s := range subjects {
				if m := s.(map[string]any); m["kind"] == "ServiceAccount" && m["name"] == "quartet-controller-manager" {
					m["name"] = "quartet-sa"
					renamed++
				}
			}
			require.NoError(t, unstructured.SetNestedSlice(want.Object, subjects, "subjects"))
		}
		require.NotNil(t, named[key], key)
		assert.Equal(t, want.Object, named[key].Object, key)
	}
	assert.Equal(t, 4, renamed, "the ServiceAccount, the Deployment and the two bindings of the manager")
}

// crdCard is one entry of artifacthub.io/crds, as Artifact Hub documents it (decoded
// strictly: a field it does not know fails).
type crdCard struct{ Kind, Version, Name, DisplayName, Description string }

// TestChartArtifactHubAnnotations: Chart.yaml carries what Artifact Hub reads
// (artifacthub/hub docs/helm_annotations.md), each annotation valid YAML of the documented
// shape, or Artifact Hub refuses the whole chart version: the licence of LICENSE, operator,
// maintainers with an email, links; the images are exactly those the chart runs (the
// manager's and the RELATED_IMAGE_* it hands the mirrors) and parse as references; crds one
// card per CRD the chart installs, at its storage version; crdsExamples only kinds of those
// CRDs, at least one for each. Artifact Hub's own image search renders the chart for
// Kubernetes 1.29 (internal/tracker/source/helm/helm.go, extractContainersImages), which
// kubeVersion refuses: hence the images annotation, without which it would list none.
func TestChartArtifactHubAnnotations(t *testing.T) {
	helm, _ := tools(t)
	var meta struct {
		KubeVersion string
		Annotations map[string]string
		Maintainers []struct{ Name, Email string }
	}
	require.NoError(t, yaml.Unmarshal(read(t, "charts/quartet/Chart.yaml"), &meta))
	ann := meta.Annotations

	assert.Contains(t, string(read(t, "LICENSE")), "Apache License\n                           Version 2.0, January 2004")
	assert.Equal(t, "Apache-2.0", ann["artifacthub.io/license"])
	assert.Equal(t, "true", ann["artifacthub.io/operator"])
	require.NotEmpty(t, meta.Maintainers)
	for _, m := range meta.Maintainers {
		assert.NotEmpty(t, m.Name)
		assert.Contains(t, m.Email, "@")
	}
	var links []struct{ Name, URL string }
	require.NoError(t, yaml.UnmarshalStrict([]byte(ann["artifacthub.io/links"]), &links))
	require.NotEmpty(t, links)
	for _, l := range links {
		assert.NotEmpty(t, l.Name)
		assert.True(t, strings.HasPrefix(l.URL, "https://"), l.URL)
	}

	// The images: what the rendered chart runs.
	var images []struct{ Name, Image string }
	require.NoError(t, yaml.UnmarshalStrict([]byte(ann["artifacthub.io/images"]), &images))
	var listed []string
	for _, i := range images {
		_, err := name.ParseReference(i.Image, name.StrictValidation)
		assert.NoError(t, err, i.Image)
		assert.NotEmpty(t, i.Name)
		listed = append(listed, i.Image)
	}
	var runs, crds []string
	for _, o := range render(t, helm) {
		switch o.GetKind() {
		case "Deployment":
			containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			for _, c := range containers {
				m := c.(map[string]any)
				runs = append(runs, m["image"].(string))
				for _, e := range m["env"].([]any) {
					if em := e.(map[string]any); strings.HasPrefix(em["name"].(string), "RELATED_IMAGE_") {
						runs = append(runs, em["value"].(string))
					}
				}
			}
		case "CustomResourceDefinition":
			kind, _, _ := unstructured.NestedString(o.Object, "spec", "names", "kind")
			group, _, _ := unstructured.NestedString(o.Object, "spec", "group")
			versions, _, _ := unstructured.NestedSlice(o.Object, "spec", "versions")
			for _, v := range versions {
				if vm := v.(map[string]any); vm["storage"] == true {
					crds = append(crds, kind+" "+group+"/"+vm["name"].(string)+" "+o.GetName())
				}
			}
		}
	}
	slices.Sort(runs)
	assert.ElementsMatch(t, slices.Compact(runs), listed, "artifacthub.io/images lists what the chart runs")

	// The CRD cards and their examples.
	var cards []crdCard
	require.NoError(t, yaml.UnmarshalStrict([]byte(ann["artifacthub.io/crds"]), &cards))
	var got []string
	for _, c := range cards {
		group := strings.SplitN(c.Name, ".", 2)[1]
		got = append(got, c.Kind+" "+group+"/"+c.Version+" "+c.Name)
		assert.NotEmpty(t, c.DisplayName)
		assert.NotEmpty(t, c.Description)
	}
	assert.ElementsMatch(t, crds, got)
	var examples []map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(ann["artifacthub.io/crdsExamples"]), &examples))
	covered := map[string]bool{}
	for _, e := range examples {
		kind, _ := e["kind"].(string)
		apiVersion, _ := e["apiVersion"].(string)
		ok := slices.ContainsFunc(cards, func(c crdCard) bool {
			return c.Kind == kind && strings.HasPrefix(apiVersion, strings.SplitN(c.Name, ".", 2)[1]+"/")
		})
		assert.True(t, ok, "example %s %s is of no CRD of the chart", apiVersion, kind)
		covered[kind] = true
	}
	for _, c := range cards {
		assert.True(t, covered[c.Kind], "no example of %s", c.Kind)
	}

	// Why the images are listed: the chart refuses Artifact Hub's Kubernetes 1.29.
	assert.Equal(t, ">=1.31.0-0", meta.KubeVersion)
	_, err := tryRun(helm, "template", "quartet", "charts/quartet", "--kube-version", "1.29")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "kubeVersion")
}

// TestChartNotes: helm install prints what it installed, the admin's consent steps (how to
// give them, or those given in the values) and where the documentation is.
func TestChartNotes(t *testing.T) {
	helm, _ := tools(t)
	notes := func(args ...string) string {
		out := string(run(t, helm, append([]string{"install", "quartet", "charts/quartet", "-n", "ops", "--dry-run=client"}, args...)...))
		i := strings.Index(out, "\nNOTES:\n")
		require.GreaterOrEqual(t, i, 0, "no NOTES in\n%s", out)
		return out[i:]
	}
	plain := notes()
	for _, want := range []string{
		"release quartet in namespace ops",
		"Deployment quartet-controller-manager (1 replica(s), image\n  quay.io/quartet-operator/quartet:v0.3.0)",
		"acting in every namespace",
		"the CRDs of ChaosAgent, CopyratorRule, ExchangeRate, RegistryMirror and RegistryHostGrant (kept when the release is uninstalled)",
		"kubectl create clusterrolebinding copyrator-platform --clusterrole=quartet-copyrator-target --serviceaccount=platform:copyrator",
		"Add registryMirror.hostGrants",
		"https://github.com/quartet-operator/quartet/blob/main/docs/INSTALL.md",
	} {
		assert.Contains(t, plain, want)
	}
	given := notes("-f", writeValues(t, consentValues), "--set", "rbac.aggregateToBuiltinRoles=false,watchNamespace=team-a")
	for _, want := range []string{
		"Given to the ServiceAccounts platform/copyrator, team-a/copy-sync.",
		"Granted: docker.io to registry-mirrors/docker-hub, registry.example.com:5000 to registry-mirrors/internal.",
		"not aggregated: bind them yourself",
		"acting in the namespaces team-a",
	} {
		assert.Contains(t, given, want)
	}
	assert.NotContains(t, given, "kubectl create clusterrolebinding")
	noRBAC := notes("--set", "rbac.create=false,serviceAccount.create=false,serviceAccount.name=mgr,crds.install=false")
	for _, want := range []string{"no RBAC (rbac.create=false)", "ServiceAccount ops/mgr", "no CRDs (crds.install=false)", "(not created by the chart)"} {
		assert.Contains(t, noRBAC, want)
	}
}
