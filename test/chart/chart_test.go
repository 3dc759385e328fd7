// Package chart tests the Helm chart charts/quartet, the consent kustomizations of
// config/consent and dist/install.yaml: the committed chart and installer are what
// hack/helmchart and make build-installer generate from config/, the chart renders what
// kustomize does, and each value, schema rule and consent entry does what the docs say.
// The tests need HELM and KUSTOMIZE (`make test` sets them).
package chart

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/quartet-operator/quartet/test/testenv"
)

// tools returns the helm and kustomize binaries `make test` passes (HELM, KUSTOMIZE).
func tools(t *testing.T) (helm, kustomize string) {
	t.Helper()
	helm, kustomize = os.Getenv("HELM"), os.Getenv("KUSTOMIZE")
	if helm == "" || kustomize == "" {
		t.Skip("HELM and KUSTOMIZE name the binaries; `make test` sets them")
	}
	return helm, kustomize
}

func run(t *testing.T, name string, args ...string) []byte {
	t.Helper()
	out, err := tryRun(name, args...)
	require.NoError(t, err, "%s %s", name, strings.Join(args, " "))
	return out
}

// tryRun runs a command in the repository's root; the error includes its stderr.
func tryRun(name string, args ...string) ([]byte, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = "../.."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("%w: %s", err, stderr.String())
	}
	return out, nil
}

// read returns the content of a file, relative to the repository's root.
func read(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("../../" + name)
	require.NoError(t, err)
	return b
}

// render is `helm template` of charts/quartet as release quartet in quartet-system (args may
// name another namespace), decoded by objects.
func render(t *testing.T, helm string, args ...string) map[string]*unstructured.Unstructured {
	t.Helper()
	return objects(t, run(t, helm, append([]string{"template", "quartet", "charts/quartet", "--namespace", "quartet-system"}, args...)...))
}

// lintClean runs helm lint --strict on charts/quartet, which must find nothing.
func lintClean(t *testing.T, helm string, args ...string) {
	t.Helper()
	lint := run(t, helm, append([]string{"lint", "--strict", "charts/quartet"}, args...)...)
	assert.NotContains(t, string(lint), "[WARNING]", "%s", lint)
	assert.NotContains(t, string(lint), "[INFO]", "%s", lint)
}

// objects decodes a YAML stream (helm template, kustomize build) into its objects, keyed
// kind/namespace/name.
func objects(t *testing.T, b []byte) map[string]*unstructured.Unstructured {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	out := map[string]*unstructured.Unstructured{}
	for {
		o := &unstructured.Unstructured{}
		err := dec.Decode(&o.Object)
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err)
		if len(o.Object) > 0 {
			out[o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName()] = o
		}
	}
}

func keys(m map[string]*unstructured.Unstructured) []string { return slices.Collect(maps.Keys(m)) }

// sameObjects checks that got holds the objects of want, and no other.
func sameObjects(t *testing.T, want, got map[string]*unstructured.Unstructured) {
	t.Helper()
	require.ElementsMatch(t, keys(want), keys(got))
	for key, o := range want {
		assert.Equal(t, o.Object, got[key].Object, key)
	}
}

// Helm's standard labels, which the chart adds to every object.
const (
	labelChart    = "helm.sh/chart"
	labelInstance = "app.kubernetes.io/instance"
)

// normalize removes what the chart changes on purpose with its default values: who manages
// the objects, Helm's standard labels (TestChartIsGeneratedFromConfig checks them), the CRDs'
// keep policy, where WATCH_NAMESPACE comes from (OLM's annotation in config/, the release's
// values in the chart; both empty outside OLM), flag order and the pull policy the API server
// defaults to.
func normalize(t *testing.T, o *unstructured.Unstructured) {
	t.Helper()
	if labels := o.GetLabels(); labels != nil {
		if _, ok := labels["app.kubernetes.io/managed-by"]; ok {
			labels["app.kubernetes.io/managed-by"] = "-"
		}
		if _, ok := labels[labelChart]; ok {
			delete(labels, labelChart)
			delete(labels, labelInstance)
		}
		o.SetLabels(labels)
	}
	if ann := o.GetAnnotations(); ann != nil {
		if delete(ann, "helm.sh/resource-policy"); len(ann) == 0 {
			ann = nil
		}
		o.SetAnnotations(ann)
	}
	if o.GetKind() != "Deployment" {
		return
	}
	containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
	for _, c := range containers {
		m := c.(map[string]any)
		if _, ok := m["imagePullPolicy"]; !ok {
			m["imagePullPolicy"] = "IfNotPresent" // the API server's default for a tagged image
		}
		slices.SortFunc(m["args"].([]any), func(a, b any) int { return strings.Compare(a.(string), b.(string)) })
		m["env"] = slices.DeleteFunc(m["env"].([]any), func(e any) bool { return e.(map[string]any)["name"] == "WATCH_NAMESPACE" })
	}
	require.NoError(t, unstructured.SetNestedSlice(o.Object, containers, "spec", "template", "spec", "containers"))
}

// TestChartIsGeneratedFromConfig: the committed chart is exactly what `make helm` makes
// from config/ today (no file more, none less), helm lint finds nothing, and the chart with
// its default values renders the same objects as `kustomize build config/default` (minus the
// Namespace, which `helm install --create-namespace` makes) plus Helm's standard labels: the
// editor and viewer roles aggregated as config/ has them, and no consent objects
// (copyrator.platformServiceAccounts and registryMirror.hostGrants are empty).
func TestChartIsGeneratedFromConfig(t *testing.T) {
	helm, kustomize := tools(t)
	config := run(t, kustomize, "build", "config/default")

	dir, version := t.TempDir(), makefileVersion(t)
	cmd := exec.Command("go", "run", "./hack/helmchart", "-out", dir, "-version", version, "-samples", "config/samples")
	cmd.Dir = "../.."
	cmd.Stdin = bytes.NewReader(config)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	generated := testenv.Files(t, dir)
	for _, rel := range generated {
		want, err := os.ReadFile(dir + "/" + rel)
		require.NoError(t, err)
		got, err := os.ReadFile(chartDir + "/" + rel)
		require.NoError(t, err, "charts/quartet/%s is missing: run make helm", rel)
		assert.Equal(t, string(want), string(got), "charts/quartet/%s differs from config/: run make helm", rel)
	}
	for _, rel := range testenv.Files(t, chartDir) {
		assert.Contains(t, generated, rel, "charts/quartet/%s is not generated any more: run make helm (which removes templates/) or delete it", rel)
	}

	lintClean(t, helm)
	rendered := render(t, helm)
	for key, o := range rendered {
		// Helm's standard labels: the chart's name and version, and the release.
		assert.Equal(t, "quartet-"+version, o.GetLabels()[labelChart], "%s: %s", key, labelChart)
		assert.Equal(t, "quartet", o.GetLabels()[labelInstance], "%s: %s", key, labelInstance)
		normalize(t, o)
	}
	want := objects(t, config)
	maps.DeleteFunc(want, func(_ string, o *unstructured.Unstructured) bool { return o.GetKind() == "Namespace" })
	for _, o := range want {
		normalize(t, o)
	}
	sameObjects(t, want, rendered)
}

// makefileVersion is the Makefile's VERSION, the one `make helm` gives the chart.
func makefileVersion(t *testing.T) string {
	t.Helper()
	for _, line := range strings.Split(string(read(t, "Makefile")), "\n") {
		if v, ok := strings.CutPrefix(line, "VERSION ?= "); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatal("no VERSION in the Makefile")
	return ""
}

// TestChartValues: each value does what values.yaml says.
func TestChartValues(t *testing.T) {
	helm, _ := tools(t)
	rendered := render(t, helm, "--namespace", "ops",
		"--set", "image.repository=registry.example/quartet,image.tag=v9,registryImage=registry.example/registry:3",
		"--set", "watchNamespace=team-a\\,team-b,leaderElection.enabled=false,metrics.enabled=false,replicaCount=1",
		"--set", "crds.install=false,extraArgs[0]=--controllers=copyratorrule",
		"--set", "extraEnv[0].name=QUARTET_EXCHANGERATE_URL,extraEnv[0].value=http://rates.internal",
		"--set", "resources.limits.memory=256Mi,nodeSelector.disk=ssd")
	for key := range rendered {
		assert.NotContains(t, key, "CustomResourceDefinition", "crds.install=false")
		assert.NotContains(t, key, "Service/", "metrics.enabled=false")
	}
	d := rendered["Deployment/ops/quartet-controller-manager"]
	require.NotNil(t, d)
	c, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	m := c[0].(map[string]any)
	assert.Equal(t, "registry.example/quartet:v9", m["image"])
	assert.Equal(t, []any{"--health-probe-bind-address=:8081", "--metrics-bind-address=0", "--controllers=copyratorrule"}, m["args"])
	env := map[string]string{}
	for _, e := range m["env"].([]any) {
		if em := e.(map[string]any); em["value"] != nil {
			env[em["name"].(string)] = em["value"].(string)
		}
	}
	assert.Equal(t, map[string]string{
		"WATCH_NAMESPACE": "team-a,team-b", "QUARTET_EXCHANGERATE_URL": "http://rates.internal",
		"RELATED_IMAGE_REGISTRY": "registry.example/registry:3", "RELATED_IMAGE_NODE_AGENT": "registry.example/quartet:v9",
	}, env)
	mem, _, _ := unstructured.NestedString(m, "resources", "limits", "memory")
	assert.Equal(t, "256Mi", mem)
	sel, _, _ := unstructured.NestedStringMap(d.Object, "spec", "template", "spec", "nodeSelector")
	assert.Equal(t, map[string]string{"disk": "ssd"}, sel)
	b := rendered["ClusterRoleBinding//quartet-manager-rolebinding"]
	require.NotNil(t, b)
	subjects, _, _ := unstructured.NestedSlice(b.Object, "subjects")
	assert.Equal(t, "ops", subjects[0].(map[string]any)["namespace"], "bindings follow the release namespace")
}
