package exchangerate

import (
	"flag"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/quartet-operator/quartet/internal/operator"
)

// Options are the manager flags of the exchangerate controller.
type Options struct {
	// MaxConcurrentReconciles is the number of parallel workers.
	MaxConcurrentReconciles int
}

// BindFlags registers the controller's flags.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	fs.IntVar(&o.MaxConcurrentReconciles, "exchangerate-workers", 2, "Parallel workers of the exchangerate controller.")
}

// Setup registers the controller with the manager.
func (o *Options) Setup(mgr ctrl.Manager, shared operator.Shared) error {
	ctrl.Log.WithName("exchangerate").Info("Controller not implemented yet; nothing registered")
	return nil
}
