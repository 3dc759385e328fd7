package status

import (
	"maps"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
)

// TestSetSeries: an object's series follow the keys given, its values set; with prune a key
// that left loses its series, another object's stay; without, the old keys' series stay.
func TestSetSeries(t *testing.T) {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "test_rate"}, []string{"ns", "name", "currency"})
	a, b := prometheus.Labels{"ns": "n", "name": "a"}, prometheus.Labels{"ns": "n", "name": "b"}
	value := func(name, currency string) float64 { return testutil.ToFloat64(g.WithLabelValues("n", name, currency)) }
	SetSeries(g, b, "currency", map[string]float64{"USD": 2}, true)
	for _, step := range []map[string]float64{
		{"USD": 1.1, "JPY": 160},
		{"USD": 1.2, "GBP": 0.85},
		{},
	} {
		SetSeries(g, a, "currency", step, true)
		assert.ElementsMatch(t, slices.Collect(maps.Keys(step)), LabelValues(g, a, "currency"))
		for currency, v := range step {
			assert.Equal(t, v, value("a", currency))
		}
		assert.Equal(t, []string{"USD"}, LabelValues(g, b, "currency"), "another object's series stay")
	}
	assert.Equal(t, 2.0, value("b", "USD"))
	SetSeries(g, b, "currency", map[string]float64{"GBP": 0.8}, false)
	assert.ElementsMatch(t, []string{"USD", "GBP"}, LabelValues(g, b, "currency"), "not pruned")
}
