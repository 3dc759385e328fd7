package chaosagent

import (
	"flag"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/quartet-operator/quartet/internal/operator"
)

// Options are the manager flags of the chaosagent controller.
type Options struct {
	// MaxConcurrentReconciles is the number of parallel workers.
	MaxConcurrentReconciles int
}

// BindFlags registers the controller's flags.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	fs.IntVar(&o.MaxConcurrentReconciles, "chaosagent-workers", 2, "Parallel workers of the chaosagent controller.")
}

// Setup registers the controller with the manager.
func (o *Options) Setup(mgr ctrl.Manager, shared operator.Shared) error {
	ctrl.Log.WithName("chaosagent").Info("Controller not implemented yet; nothing registered")
	return nil
}
