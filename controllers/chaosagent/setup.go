package chaosagent

import (
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	blackadderv1beta1 "github.com/quartet-operator/quartet/api/blackadder/v1beta1"
	"github.com/quartet-operator/quartet/internal/operator"
)

// Setup registers the controller with the manager. Informers for pods, Deployments,
// ConfigMaps, HorizontalPodAutoscalers and Namespaces start on an agent's first round. The
// flag values are checked first (newReconciler calls complete), before the manager is touched.
func (o *Options) Setup(mgr ctrl.Manager, shared operator.Shared) error {
	r, err := o.newReconciler(mgr, shared)
	if err != nil {
		return err
	}
	return o.register(mgr, r)
}

// newReconciler checks the flag values (complete) and returns the reconciler they call for,
// with the manager's clients and recorder, the real clock and the seeded random source.
// Setup registers it as it is; a test may replace a field (its clock) before it registers
// it, and keeps it to call its methods (the benchmarks).
func (o *Options) newReconciler(mgr ctrl.Manager, shared operator.Shared) (*Reconciler, error) {
	if err := o.complete(); err != nil {
		return nil, err
	}
	allowed, err := o.guardAllowedPrefixes()
	if err != nil {
		return nil, err
	}
	r := &Reconciler{
		Client:    client.WithFieldOwner(mgr.GetClient(), FieldOwner),
		APIReader: mgr.GetAPIReader(),
		Recorder:  mgr.GetEventRecorder(FieldOwner),
		Clock:     clock.RealClock{},
		NewRand:   seededRand,
		// Latency is measured on the real clock, whatever the rounds' clock says.
		HTTP:      NewHTTPChecker(clock.RealClock{}, allowed),
		Protected: o.protected(shared.OperatorNamespace),
		Watched:   sets.New(shared.WatchNamespaces...),
	}
	if shared.OperatorNamespace == "" {
		// Run outside a cluster, or without OPERATOR_NAMESPACE / POD_NAMESPACE: nothing marks
		// the manager's own namespace, so say once that agents are not kept out of it.
		mgr.GetLogger().WithName("chaosagent").Info("Operator namespace unknown: it is not protected from ChaosAgents; "+
			"set OPERATOR_NAMESPACE or list it in --chaos-protected-namespaces", "protectedNamespaces", sets.List(r.Protected))
	}
	return r, nil
}

// register adds r to the manager as the chaosagent controller.
func (o *Options) register(mgr ctrl.Manager, r *Reconciler) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("chaosagent").
		// Rounds run on RequeueAfter timers; only spec edits and deletion wake an agent early,
		// never its own status writes.
		For(&blackadderv1beta1.ChaosAgent{}, builder.WithPredicates(predicate.Or[client.Object](
			predicate.GenerationChangedPredicate{}, operator.DeletionStarted()))).
		WithOptions(controller.Options{MaxConcurrentReconciles: o.MaxConcurrentReconciles}).
		Complete(r)
}
