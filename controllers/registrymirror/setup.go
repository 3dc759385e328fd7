package registrymirror

import (
	"context"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	mirrorsv1alpha1 "github.com/quartet-operator/quartet/api/mirrors/v1alpha1"
	"github.com/quartet-operator/quartet/internal/operator"
)

// Setup registers the controller with the manager: the mirrors (spec changes only), the
// children they own, and objects of a child's name that nobody controls.
func (o *Options) Setup(mgr ctrl.Manager, shared operator.Shared) error {
	// Checked before anything else, so a bad value stops the manager at start.
	probeAllowed, err := o.probeAllowedPrefixes()
	if err != nil {
		return err
	}
	images := ImagesFromEnv()
	if images.AssignedUIDs, err = o.assignedUIDs(func() bool {
		_, err := mgr.GetRESTMapper().RESTMapping(schema.GroupKind{Group: "security.openshift.io", Kind: "SecurityContextConstraints"})
		return err == nil
	}); err != nil {
		return err
	}
	workers := o.MaxConcurrentReconciles
	if workers < 1 {
		workers = defaultWorkers
	}
	r := &Reconciler{
		Client:    mgr.GetClient(),
		Recorder:  mgr.GetEventRecorder("registrymirror"),
		Clock:     clock.RealClock{},
		Images:    images,
		Shared:    shared,
		HostsRoot: o.HostsRoot,
	}
	if o.Probes {
		r.Prober = NewHTTPProber(r.Clock, probeAllowed)
	}
	inScope := predicate.NewPredicateFuncs(func(o client.Object) bool { return shared.Watches(o.GetNamespace()) })
	// Objects of a child's name that nobody controls: their creation or deletion may start
	// or end a conflict, which Owns() cannot see.
	uncontrolled := predicate.NewPredicateFuncs(func(o client.Object) bool {
		return metav1.GetControllerOf(o) == nil && shared.Watches(o.GetNamespace())
	})
	b := ctrl.NewControllerManagedBy(mgr).
		Named("registrymirror").
		// Generation changes only: the controller's own status writes do not wake it.
		For(&mirrorsv1alpha1.RegistryMirror{}, builder.WithPredicates(predicate.GenerationChangedPredicate{}, inScope)).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers})
	for _, obj := range []client.Object{&corev1.ConfigMap{}, &corev1.Service{}, &corev1.PersistentVolumeClaim{}, &appsv1.StatefulSet{},
		&appsv1.DaemonSet{}, &networkingv1.NetworkPolicy{}} {
		b = b.Owns(obj, builder.WithPredicates(inScope)).
			Watches(obj, handler.EnqueueRequestsFromMapFunc(mirrorsNamedAfter), builder.WithPredicates(uncontrolled))
	}
	// A grant's change may give or take node access from the mirrors of its host.
	b = b.Watches(&mirrorsv1alpha1.RegistryHostGrant{}, handler.EnqueueRequestsFromMapFunc(r.mirrorsOfGrant))
	return b.Complete(r)
}

// mirrorsOfGrant maps a RegistryHostGrant to the mirrors it may concern.
func (r *Reconciler) mirrorsOfGrant(ctx context.Context, o client.Object) []reconcile.Request {
	grant, ok := o.(*mirrorsv1alpha1.RegistryHostGrant)
	if !ok {
		return nil
	}
	var mirrors mirrorsv1alpha1.RegistryMirrorList
	if err := r.List(ctx, &mirrors); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Failed to list RegistryMirrors for a RegistryHostGrant event", "registryHostGrant", grant.Name)
		return nil
	}
	var out []reconcile.Request
	for _, key := range mirrorsOfHost(grant, mirrors.Items) {
		if r.Shared.Watches(key.Namespace) {
			out = append(out, reconcile.Request{NamespacedName: key})
		}
	}
	return out
}

// mirrorsNamedAfter maps an object to the mirrors whose child it would be by name.
func mirrorsNamedAfter(_ context.Context, o client.Object) []reconcile.Request {
	var out []reconcile.Request
	for _, suffix := range childSuffixes {
		if name, ok := strings.CutSuffix(o.GetName(), suffix); ok && name != "" {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}})
		}
	}
	return out
}
