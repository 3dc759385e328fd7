package registrymirror

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/quartet-operator/quartet/internal/operator"
)

// Writes the controller makes to the children of mirrors, by kind and result. A steady
// cluster adds nothing here: passes that find a child up to date do not write.
var objectWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "quartet_registrymirror_object_writes_total",
	Help: "Writes to RegistryMirror children, by kind and result: server-side applies (created, updated, refused, failed), drift reverted (reverted), children deleted when no longer allowed or needed (deleted), and objects found owned by someone else (conflict).",
}, []string{"kind", "result"})

// readyGauge mirrors each RegistryMirror's Ready condition, so an alert can name the
// mirror that stopped serving: 1 when Ready is True, 0 otherwise (False or Unknown).
var readyGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "quartet_registrymirror_ready",
	Help: "1 when the RegistryMirror's Ready condition is True, 0 when it is False or Unknown, by mirror.",
}, []string{"mirror_namespace", "mirror"})

func init() {
	metrics.Registry.MustRegister(objectWrites, readyGauge)
}

// recordReady sets the mirror's readiness series.
func recordReady(m types.NamespacedName, ready bool) {
	operator.SetCondition(readyGauge, ready, m.Namespace, m.Name)
}

// forgetMirror drops the series of a mirror that is gone.
func forgetMirror(m types.NamespacedName) {
	readyGauge.DeleteLabelValues(m.Namespace, m.Name)
}
