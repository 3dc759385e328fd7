package chart

import (
	"maps"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestChartGrafanaDashboards: with grafanaDashboards.enabled the chart makes the ConfigMaps
// config/grafana's kustomization makes (the same names, dashboards, sidecar label and folder
// annotation), in the namespace and with the label asked for; without it, none (the default
// render is compared with config/default by TestChartIsGeneratedFromConfig).
func TestChartGrafanaDashboards(t *testing.T) {
	helm, kustomize := tools(t)
	want := objects(t, run(t, kustomize, "build", "config/grafana"))
	require.Len(t, want, 5, "config/grafana: one ConfigMap per dashboard")
	dashboards := func(rendered map[string]*unstructured.Unstructured) map[string]*unstructured.Unstructured {
		maps.DeleteFunc(rendered, func(_ string, o *unstructured.Unstructured) bool { return o.GetKind() != "ConfigMap" })
		return rendered
	}

	got := dashboards(render(t, helm, "--set", "grafanaDashboards.enabled=true"))
	require.Len(t, got, len(want))
	for _, o := range want {
		key := "ConfigMap/quartet-system/" + o.GetName()
		require.Contains(t, got, key)
		normalize(t, o)
		normalize(t, got[key])
		assert.Equal(t, o.GetLabels(), got[key].GetLabels(), key)
		assert.Equal(t, o.GetAnnotations(), got[key].GetAnnotations(), key)
		assert.Equal(t, o.Object["data"], got[key].Object["data"], key)
	}

	got = dashboards(render(t, helm, "--set", "grafanaDashboards.enabled=true,grafanaDashboards.namespace=monitoring",
		"--set", "grafanaDashboards.label=dashboards,grafanaDashboards.labelValue=quartet,grafanaDashboards.folder="))
	require.Len(t, got, len(want))
	for _, o := range got {
		assert.Equal(t, "monitoring", o.GetNamespace())
		assert.Equal(t, "quartet", o.GetLabels()["dashboards"])
		assert.NotContains(t, o.GetLabels(), "grafana_dashboard")
		assert.Empty(t, o.GetAnnotations(), "no folder, no annotation")
	}
	lintClean(t, helm, "--set", "grafanaDashboards.enabled=true")
	assert.Empty(t, dashboards(render(t, helm)), "off by default")

	_, err := tryRun(helm, "template", "quartet", "charts/quartet", "--set", "grafanaDashboards.label=has space")
	require.Error(t, err, "the schema refuses a label that is not a label name")
}
