package chaosagent

import (
	"flag"

	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/quartet-operator/quartet/internal/operator"
)

// defaultWorkers is the default of --chaosagent-workers, also used when it is below 1.
const defaultWorkers = 2

// Options are the manager flags of the chaosagent controller.
type Options struct {
	// MaxConcurrentReconciles is the number of agents served in parallel.
	MaxConcurrentReconciles int
	// ProtectedNamespaces is a comma-separated list of namespaces no agent ever touches, in
	// addition to operator.SystemNamespaces and the operator's own namespace.
	ProtectedNamespaces string

	// reconciler is the registered reconciler, for the benchmark.
	reconciler *Reconciler
}

// BindFlags registers the controller's flags.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	fs.IntVar(&o.MaxConcurrentReconciles, "chaosagent-workers", defaultWorkers, "Parallel workers of the chaosagent controller.")
	fs.StringVar(&o.ProtectedNamespaces, "chaos-protected-namespaces", "",
		"Comma-separated namespaces no ChaosAgent ever touches, whatever its spec says, in addition to kube-system, "+
			"kube-public, kube-node-lease and the operator's own namespace, which are always protected.")
}

// protected returns the namespaces no agent touches: operator.SystemNamespaces, the flag's
// list and the operator's own namespace (when known).
func (o *Options) protected(operatorNamespace string) sets.Set[string] {
	return operator.Shared{OperatorNamespace: operatorNamespace}.Protected(operator.ParseNamespaces(o.ProtectedNamespaces)...)
}

// workers returns the number of agents served in parallel.
func (o *Options) workers() int {
	if o.MaxConcurrentReconciles < 1 {
		return defaultWorkers
	}
	return o.MaxConcurrentReconciles
}
