package registrymirror

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Writes the controller makes to the children of mirrors, by kind and result. A steady
// cluster adds nothing here: passes that find a child up to date do not write.
var objectWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "quartet_registrymirror_object_writes_total",
	Help: "Server-side applies of RegistryMirror children, by kind and result (created, updated, refused, failed), and objects found owned by someone else (conflict).",
}, []string{"kind", "result"})

func init() {
	metrics.Registry.MustRegister(objectWrites)
}
