// Package chart tests the Helm chart charts/quartet and the consent kustomizations of
// config/consent: the committed chart is what hack/helmchart generates from config/, renders
// what kustomize does, and each value, schema rule and consent entry does what the docs say.
// The tests need HELM and KUSTOMIZE (`make test` sets them).
package chart

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
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

// Helm's standard labels, which the chart adds to every object (checked by chartLabels).
const (
	labelChart    = "helm.sh/chart"
	labelInstance = "app.kubernetes.io/instance"
)

// chartLabels checks that every object the chart renders carries Helm's standard labels:
// helm.sh/chart with the chart's name and version, app.kubernetes.io/instance with the release.
func chartLabels(t *testing.T, objs map[string]*unstructured.Unstructured, release string) {
	t.Helper()
	version := makefileVersion(t)
	for key, o := range objs {
		assert.Equal(t, "quartet-"+version, o.GetLabels()[labelChart], "%s: %s", key, labelChart)
		assert.Equal(t, release, o.GetLabels()[labelInstance], "%s: %s", key, labelInstance)
	}
}

// normalize removes what the chart changes on purpose with its default values: who manages
// the objects, Helm's standard labels (chartLabels checks them), the CRDs' keep policy, where
// WATCH_NAMESPACE comes from (OLM's annotation in config/, the release's values in the chart;
// both empty outside OLM), flag order and the pull policy the API server defaults to.
func normalize(t *testing.T, o *unstructured.Unstructured) {
	t.Helper()
	labels := o.GetLabels()
	if _, ok := labels["app.kubernetes.io/managed-by"]; ok {
		labels["app.kubernetes.io/managed-by"] = "-"
		o.SetLabels(labels)
	}
	if _, ok := labels[labelChart]; ok {
		delete(labels, labelChart)
		delete(labels, labelInstance)
		o.SetLabels(labels)
	}
	if ann := o.GetAnnotations(); ann != nil {
		delete(ann, "helm.sh/resource-policy")
		if len(ann) == 0 {
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
		var args []string
		for _, a := range m["args"].([]any) {
			args = append(args, a.(string))
		}
		sort.Strings(args)
		sorted := make([]any, len(args))
		for i, a := range args {
			sorted[i] = a
		}
		m["args"] = sorted
		var env []any
		for _, e := range m["env"].([]any) {
			if e.(map[string]any)["name"] != "WATCH_NAMESPACE" {
				env = append(env, e)
			}
		}
		m["env"] = env
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

	dir := t.TempDir()
	version := makefileVersion(t)
	cmd := exec.Command("go", "run", "./hack/helmchart", "-out", dir, "-version", version, "-samples", "config/samples")
	cmd.Dir = "../.."
	cmd.Stdin = bytes.NewReader(config)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	committed := "../../charts/quartet"
	require.NoError(t, filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		want, err := os.ReadFile(path)
		require.NoError(t, err)
		got, err := os.ReadFile(filepath.Join(committed, rel))
		require.NoError(t, err, "charts/quartet/%s is missing: run make helm", rel)
		assert.Equal(t, string(want), string(got), "charts/quartet/%s differs from config/: run make helm", rel)
		return nil
	}))
	require.NoError(t, filepath.WalkDir(committed, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(committed, path)
		_, err = os.Stat(filepath.Join(dir, rel))
		assert.NoError(t, err, "charts/quartet/%s is not generated any more: run make helm (which removes templates/) or delete it", rel)
		return nil
	}))

	lint := run(t, helm, "lint", "--strict", "charts/quartet")
	assert.NotContains(t, string(lint), "[WARNING]", "%s", lint)
	assert.NotContains(t, string(lint), "[INFO]", "%s", lint)

	rendered := objects(t, run(t, helm, "template", "quartet", "charts/quartet", "--namespace", "quartet-system"))
	chartLabels(t, rendered, "quartet")
	want := objects(t, config)
	for key, o := range want {
		if o.GetKind() == "Namespace" {
			delete(want, key)
			continue
		}
		normalize(t, o)
	}
	for _, o := range rendered {
		normalize(t, o)
	}
	require.ElementsMatch(t, keys(want), keys(rendered))
	for key, o := range want {
		assert.Equal(t, o.Object, rendered[key].Object, key)
	}
}

// makefileVersion is the Makefile's VERSION, the one `make helm` gives the chart.
func makefileVersion(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../Makefile")
	require.NoError(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VERSION ?= "); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatal("no VERSION in the Makefile")
	return ""
}

func keys(m map[string]*unstructured.Unstructured) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestChartValues: each value does what values.yaml says.
func TestChartValues(t *testing.T) {
	helm, _ := tools(t)
	rendered := objects(t, run(t, helm, "template", "quartet", "charts/quartet", "--namespace", "ops",
		"--set", "image.repository=registry.example/quartet,image.tag=v9,registryImage=registry.example/registry:3",
		"--set", "watchNamespace=team-a\\,team-b,leaderElection.enabled=false,metrics.enabled=false,replicaCount=1",
		"--set", "crds.install=false,extraArgs[0]=--controllers=copyratorrule",
		"--set", "extraEnv[0].name=QUARTET_EXCHANGERATE_URL,extraEnv[0].value=http://rates.internal",
		"--set", "resources.limits.memory=256Mi,nodeSelector.disk=ssd"))
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
		em := e.(map[string]any)
		if v, ok := em["value"].(string); ok {
			env[em["name"].(string)] = v
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
