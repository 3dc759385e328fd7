package status

import (
	"maps"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	dto "github.com/prometheus/client_model/go"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Registered makes the controllers' collectors, registered with controller-runtime's registry,
// which the manager serves.
var Registered = promauto.With(metrics.Registry)

// SetGauge sets the series of g with the given label values to 1 when on, else 0: a status
// condition turned into a gauge an alert can select.
func SetGauge(g *prometheus.GaugeVec, on bool, labelValues ...string) {
	v := 0.0
	if on {
		v = 1
	}
	g.WithLabelValues(labelValues...).Set(v)
}

// SetSeries sets one series of g per key of values, its value under label, among the series
// of one object (its labels). With prune it then deletes the object's other series: a key
// that left loses its series, and a scrape never sees none. Pruning reads every series of g
// (LabelValues), so a caller prunes only when the keys may have changed.
func SetSeries(g *prometheus.GaugeVec, object prometheus.Labels, label string, values map[string]float64, prune bool) {
	with := func(v string) prometheus.Labels {
		l := maps.Clone(object)
		l[label] = v
		return l
	}
	for k, v := range values {
		g.With(with(k)).Set(v)
	}
	if !prune {
		return
	}
	for _, k := range LabelValues(g, object, label) {
		if _, keep := values[k]; !keep {
			g.Delete(with(k))
		}
	}
}

// LabelValues returns the values of label of c's series that carry the given labels.
func LabelValues(c prometheus.Collector, match prometheus.Labels, label string) []string {
	ch := make(chan prometheus.Metric)
	go func() { c.Collect(ch); close(ch) }()
	var out []string
	for metric := range ch {
		var d dto.Metric
		if metric.Write(&d) != nil {
			continue
		}
		labels := map[string]string{}
		for _, l := range d.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		matches := true
		for k, v := range match {
			matches = matches && labels[k] == v
		}
		if matches {
			out = append(out, labels[label])
		}
	}
	return out
}
