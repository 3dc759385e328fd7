package status

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
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
