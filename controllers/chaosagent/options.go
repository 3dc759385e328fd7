package chaosagent

import (
	"flag"

	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/quartet-operator/quartet/internal/operator"
)

// DefaultProtectedNamespaces is the default of --chaos-protected-namespaces.
const DefaultProtectedNamespaces = "kube-system"

// defaultWorkers is the default of --chaosagent-workers, also used when it is below 1.
const defaultWorkers = 2

// Options are the manager flags of the chaosagent controller.
type Options struct {
	// MaxConcurrentReconciles is the number of agents served in parallel.
	MaxConcurrentReconciles int
	// ProtectedNamespaces is a comma-separated list of namespaces no agent ever touches. The
	// operator's own namespace is always added.
	ProtectedNamespaces string

	// flagsBound is true once BindFlags ran; Options used without flags get the flag defaults.
	flagsBound bool
	// reconciler is the registered reconciler, for the benchmark.
	reconciler *Reconciler
}

// BindFlags registers the controller's flags.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	o.flagsBound = true
	fs.IntVar(&o.MaxConcurrentReconciles, "chaosagent-workers", defaultWorkers, "Parallel workers of the chaosagent controller.")
	fs.StringVar(&o.ProtectedNamespaces, "chaos-protected-namespaces", DefaultProtectedNamespaces,
		"Comma-separated namespaces no ChaosAgent ever touches, whatever its spec says. The operator's own namespace is always added.")
}

// protected returns the namespaces no agent touches: the flag's list (its default when the
// flags were not bound) and the operator's own namespace.
func (o *Options) protected(operatorNamespace string) sets.Set[string] {
	list := o.ProtectedNamespaces
	if !o.flagsBound && list == "" {
		list = DefaultProtectedNamespaces
	}
	out := sets.New(operator.ParseNamespaces(list)...)
	if operatorNamespace != "" {
		out.Insert(operatorNamespace)
	}
	return out
}

// workers returns the number of agents served in parallel.
func (o *Options) workers() int {
	if o.MaxConcurrentReconciles < 1 {
		return defaultWorkers
	}
	return o.MaxConcurrentReconciles
}
