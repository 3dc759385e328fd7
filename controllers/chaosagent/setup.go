package chaosagent

import (
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	blackadderv1beta1 "github.com/quartet-operator/quartet/api/blackadder/v1beta1"
	"github.com/quartet-operator/quartet/internal/scope"
	"github.com/quartet-operator/quartet/internal/status"
)

// Setup checks the flag values, before the manager is touched, and registers the controller.
func (o *Options) Setup(mgr ctrl.Manager, shared scope.Namespaces) error {
	if err := o.complete(); err != nil {
		return err
	}
	r, err := o.newReconciler(shared)
	if err != nil {
		return err
	}
	if shared.Operator == "" { // outside a cluster, or without OPERATOR_NAMESPACE / POD_NAMESPACE
		mgr.GetLogger().WithName("chaosagent").Info("Operator namespace unknown: it is not protected from ChaosAgents; "+
			"set OPERATOR_NAMESPACE or list it in --chaos-protected-namespaces", "protectedNamespaces", sets.List(r.Protected))
	}
	return o.register(mgr, r)
}

// newReconciler is the reconciler of the flags; register adds the manager's. Tests change it between.
func (o *Options) newReconciler(shared scope.Namespaces) (*Reconciler, error) {
	allowed, err := o.guardAllowedPrefixes()
	if err != nil {
		return nil, err
	}
	return &Reconciler{
		Clock:   clock.RealClock{},
		NewRand: seededRand,
		// Latency is measured on the real clock, whatever the rounds' clock says.
		HTTP:      NewHTTPChecker(clock.RealClock{}, allowed),
		Protected: o.protected(shared.Operator),
		Watched:   sets.New(shared.Watched...),
	}, nil
}

// register gives r the manager's clients, recorder and status writer, and adds it to the manager.
func (o *Options) register(mgr ctrl.Manager, r *Reconciler) error {
	r.Client = client.WithFieldOwner(mgr.GetClient(), FieldOwner)
	r.APIReader = mgr.GetAPIReader()
	r.Recorder = mgr.GetEventRecorder(FieldOwner)
	r.status = status.NewWriter(r.Client, r.APIReader, func(a *blackadderv1beta1.ChaosAgent) *int64 { return &a.Status.ObservedGeneration })
	return ctrl.NewControllerManagedBy(mgr).
		Named("chaosagent").
		// Rounds run on RequeueAfter timers; only spec edits and deletion wake an agent early,
		// never its own status writes.
		For(&blackadderv1beta1.ChaosAgent{}, builder.WithPredicates(predicate.Or[client.Object](
			predicate.GenerationChangedPredicate{}, scope.DeletionStarted()))).
		WithOptions(controller.Options{MaxConcurrentReconciles: o.MaxConcurrentReconciles}).
		Complete(r)
}

// CacheOptions are what a round's reads of the manager's shared cache need, for
// manager.Options: only Running pods, and Deployments and HorizontalPodAutoscalers stripped
// to what a round decides on. main.go adds them when this controller runs; any other reader
// of those kinds in the same manager (none today: RegistryMirror's pods are in a cache of
// its own) would see only Running pods and the stripped objects too.
func CacheOptions() map[client.Object]cache.ByObject {
	return map[client.Object]cache.ByObject{
		// Keyed by kind, so it also selects the metadata-only informer a round lists pods from.
		&corev1.Pod{}:                            {Field: runningPods},
		&appsv1.Deployment{}:                     {Transform: StripDeployment},
		&autoscalingv2.HorizontalPodAutoscaler{}: {Transform: StripHPA},
	}
}

// runningPods is the field selector of the pods a round sees: only Running pods count toward
// podTolerance and only they are killed. Pending pods must not count, or a tenant in an
// agent's scope could push it past its tolerance with unschedulable pods and start kills on
// other tenants' pods; and killing a pod that does not run tests nobody's resilience. The API
// server filters (the metadata the cache holds has no phase, so no check after the cache
// could), so pods that are not Running never reach the cache: no memory for them, and a pod
// leaving Running leaves the cache as its watch event arrives.
var runningPods = fields.OneTermEqualSelector("status.phase", string(corev1.PodRunning))

// StripDeployment keeps of a Deployment what a round reads: metadata, replicas and selector.
func StripDeployment(in any) (any, error) {
	d, ok := in.(*appsv1.Deployment)
	if !ok {
		return in, nil // a tombstone
	}
	d.ManagedFields = nil
	d.Spec = appsv1.DeploymentSpec{Replicas: d.Spec.Replicas, Selector: d.Spec.Selector}
	d.Status = appsv1.DeploymentStatus{}
	return d, nil
}

// StripHPA keeps of a HorizontalPodAutoscaler its metadata and the target it scales.
func StripHPA(in any) (any, error) {
	h, ok := in.(*autoscalingv2.HorizontalPodAutoscaler)
	if !ok {
		return in, nil
	}
	h.ManagedFields = nil
	h.Spec = autoscalingv2.HorizontalPodAutoscalerSpec{ScaleTargetRef: h.Spec.ScaleTargetRef}
	h.Status = autoscalingv2.HorizontalPodAutoscalerStatus{}
	return h, nil
}
