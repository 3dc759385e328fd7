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

// Setup checks the flag values, before the manager is touched, and registers the
// controller with the manager. Informers for pods, Deployments, ConfigMaps,
// HorizontalPodAutoscalers and Namespaces start on an agent's first round.
func (o *Options) Setup(mgr ctrl.Manager, shared operator.Shared) error {
	if err := o.complete(); err != nil {
		return err
	}
	r, err := o.newReconciler(shared)
	if err != nil {
		return err
	}
	if shared.OperatorNamespace == "" {
		// Run outside a cluster, or without OPERATOR_NAMESPACE / POD_NAMESPACE: nothing marks
		// the manager's own namespace, so say once that agents are not kept out of it.
		mgr.GetLogger().WithName("chaosagent").Info("Operator namespace unknown: it is not protected from ChaosAgents; "+
			"set OPERATOR_NAMESPACE or list it in --chaos-protected-namespaces", "protectedNamespaces", sets.List(r.Protected))
	}
	return o.register(mgr, r)
}

// newReconciler is the reconciler the flag values in o (completed) call for, with the real
// clock and the seeded random source; register adds what comes from the manager. A test may
// replace a field (its clock) before it registers it, and keeps it to call its methods (the
// benchmarks).
func (o *Options) newReconciler(shared operator.Shared) (*Reconciler, error) {
	allowed, err := o.guardAllowedPrefixes()
	if err != nil {
		return nil, err
	}
	return &Reconciler{
		Clock:   clock.RealClock{},
		NewRand: seededRand,
		// Latency is measured on the real clock, whatever the rounds' clock says.
		HTTP:      NewHTTPChecker(clock.RealClock{}, allowed),
		Protected: o.protected(shared.OperatorNamespace),
		Watched:   sets.New(shared.WatchNamespaces...),
	}, nil
}

// register gives r the manager's clients and recorder, and adds r to the manager as the
// chaosagent controller.
func (o *Options) register(mgr ctrl.Manager, r *Reconciler) error {
	r.Client = client.WithFieldOwner(mgr.GetClient(), FieldOwner)
	r.APIReader = mgr.GetAPIReader()
	r.Recorder = mgr.GetEventRecorder(FieldOwner)
	return ctrl.NewControllerManagedBy(mgr).
		Named("chaosagent").
		// Rounds run on RequeueAfter timers; only spec edits and deletion wake an agent early,
		// never its own status writes.
		For(&blackadderv1beta1.ChaosAgent{}, builder.WithPredicates(predicate.Or[client.Object](
			predicate.GenerationChangedPredicate{}, operator.DeletionStarted()))).
		WithOptions(controller.Options{MaxConcurrentReconciles: o.MaxConcurrentReconciles}).
		Complete(r)
}
