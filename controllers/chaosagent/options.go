package chaosagent

import (
	"flag"
	"fmt"
	"math/rand/v2"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	v1beta1 "github.com/quartet-operator/quartet/api/blackadder/v1beta1"
	"github.com/quartet-operator/quartet/internal/operator"
)

// DefaultProtectedNamespaces is the default of --chaos-protected-namespaces.
const DefaultProtectedNamespaces = "kube-system"

// Options are the manager flags of the chaosagent controller.
type Options struct {
	// MaxConcurrentReconciles is the number of agents served in parallel.
	MaxConcurrentReconciles int
	// ProtectedNamespaces is a comma-separated list of namespaces no agent ever touches. The
	// operator's own namespace is always added.
	ProtectedNamespaces string

	flagsBound bool
	// clock and newRand replace the real clock and random source in tests.
	clock   clock.Clock
	newRand func(agent *v1beta1.ChaosAgent, round int64) *rand.Rand
	// reconciler is the registered reconciler, for tests and benchmarks.
	reconciler *Reconciler
}

// BindFlags registers the controller's flags.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	o.flagsBound = true
	fs.IntVar(&o.MaxConcurrentReconciles, "chaosagent-workers", 2, "Parallel workers of the chaosagent controller.")
	fs.StringVar(&o.ProtectedNamespaces, "chaos-protected-namespaces", DefaultProtectedNamespaces,
		"Comma-separated namespaces no ChaosAgent ever touches, whatever its spec says. The operator's own namespace is always added.")
}

// Setup registers the controller with the manager. Informers for pods, Deployments,
// ConfigMaps, HorizontalPodAutoscalers and Namespaces start on an agent's first round.
func (o *Options) Setup(mgr ctrl.Manager, shared operator.Shared) error {
	if err := registerMetrics(); err != nil {
		return fmt.Errorf("registering metrics: %w", err)
	}
	protectedFlag := o.ProtectedNamespaces
	if !o.flagsBound && protectedFlag == "" {
		protectedFlag = DefaultProtectedNamespaces
	}
	protected := sets.New(operator.ParseNamespaces(protectedFlag)...)
	if shared.OperatorNamespace != "" {
		protected.Insert(shared.OperatorNamespace)
	}
	r := &Reconciler{
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Recorder:  mgr.GetEventRecorder("chaosagent-controller"),
		Clock:     clock.RealClock{},
		NewRand:   seededRand,
		Protected: protected,
		Watched:   sets.New(shared.WatchNamespaces...),
	}
	if o.clock != nil {
		r.Clock = o.clock
	}
	if o.newRand != nil {
		r.NewRand = o.newRand
	}
	o.reconciler = r
	workers := o.MaxConcurrentReconciles
	if workers < 1 {
		workers = 2
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("chaosagent").
		// Rounds run on RequeueAfter timers; only spec edits and deletion wake an agent early,
		// never its own status writes.
		For(&v1beta1.ChaosAgent{}, builder.WithPredicates(predicate.Or[client.Object](
			predicate.GenerationChangedPredicate{}, deletionStarted()))).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		Complete(r)
}

// deletionStarted passes the update that sets metadata.deletionTimestamp.
func deletionStarted() predicate.Funcs {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		return e.ObjectOld.GetDeletionTimestamp() == nil && e.ObjectNew.GetDeletionTimestamp() != nil
	}}
}
