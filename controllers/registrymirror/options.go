package registrymirror

import (
	"context"
	"fmt"
	"os"
	"flag"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/quartet-operator/quartet/internal/operator"
)

// Options are the manager flags of the registrymirror controller.
type Options struct {
	// MaxConcurrentReconciles is the number of parallel workers.
	MaxConcurrentReconciles int
}

// BindFlags registers the controller's flags.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	fs.IntVar(&o.MaxConcurrentReconciles, "registrymirror-workers", 2, "Parallel workers of the registrymirror controller.")
}

// Setup registers the controller with the manager.
func (o *Options) Setup(mgr ctrl.Manager, shared operator.Shared) error {
	ctrl.Log.WithName("registrymirror").Info("Controller not implemented yet; nothing registered")
	return nil
}

// NodeAgentMain runs the node side of a RegistryMirror (`manager node-agent`).
func NodeAgentMain(ctx context.Context, args []string) int {
	fmt.Fprintln(os.Stderr, "node-agent: not implemented yet")
	return 1
}
