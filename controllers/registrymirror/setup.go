package registrymirror

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	mirrorsv1alpha1 "github.com/quartet-operator/quartet/api/mirrors/v1alpha1"
	"github.com/quartet-operator/quartet/internal/operator"
)

// Setup registers the controller with the manager: the mirrors (spec changes only), the
// children they own, and objects of a child's name that nobody controls.
func (o *Options) Setup(mgr ctrl.Manager, shared operator.Shared) error {
	// Checked before anything else, so a bad value stops the manager at start.
	if err := o.complete(); err != nil {
		return err
	}
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
	children, err := newChildCache(mgr, shared.WatchNamespaces)
	if err != nil {
		return err
	}
	if err := mgr.Add(children); err != nil {
		return fmt.Errorf("adding the child cache: %w", err)
	}
	pods, err := newPodCache(mgr, shared.WatchNamespaces)
	if err != nil {
		return err
	}
	if err := mgr.Add(pods); err != nil {
		return fmt.Errorf("adding the pod cache: %w", err)
	}
	r := &Reconciler{
		Client:    client.WithFieldOwner(mgr.GetClient(), FieldOwner),
		APIReader: mgr.GetAPIReader(),
		Recorder:  mgr.GetEventRecorder(FieldOwner),
		Clock:     clock.RealClock{},
		Shared:    shared,
		Children:  children,
		Pods:      pods,
		Images:    images,
		HostsRoot: o.HostsRoot,
	}
	if o.Probes {
		r.Prober = NewHTTPProber(r.Clock, probeAllowed)
	}
	inScope := predicate.NewPredicateFuncs(func(o client.Object) bool { return shared.Watches(o.GetNamespace()) })
	b := ctrl.NewControllerManagedBy(mgr).
		Named("registrymirror").
		// Generation changes only: the controller's own status writes do not wake it.
		For(&mirrorsv1alpha1.RegistryMirror{}, builder.WithPredicates(predicate.GenerationChangedPredicate{}, inScope)).
		WithOptions(controller.Options{MaxConcurrentReconciles: o.MaxConcurrentReconciles})
	// A child's change wakes its mirror. An object of a child's name that someone else
	// made is not watched (that would be a watch of every object of the kind in the
	// cluster): a mirror that finds one looks again every conflictRecheck.
	for _, obj := range childKinds() {
		b = b.WatchesRawSource(source.Kind[client.Object](children, obj,
			handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), &mirrorsv1alpha1.RegistryMirror{}, handler.OnlyControllerOwner()),
			inScope))
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
	if err := r.Client.List(ctx, &mirrors); err != nil {
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

// childKinds are the kinds of a mirror's children.
func childKinds() []client.Object {
	return []client.Object{&corev1.ConfigMap{}, &corev1.Service{}, &corev1.PersistentVolumeClaim{}, &appsv1.StatefulSet{},
		&appsv1.DaemonSet{}, &networkingv1.NetworkPolicy{}}
}

// newChildCache builds the cache of the mirrors' children: objects of childKinds labelled
// managed-by quartet-registrymirror only, in the watched namespaces, without the field sets
// of managedFields (stripFieldSets). Memory follows the mirrors, never the cluster's ConfigMaps, Services or
// StatefulSets; reading any other kind through it is a bug, not a reason to start a watch.
func newChildCache(mgr ctrl.Manager, watchNamespaces []string) (cache.Cache, error) {
	ours := cache.ByObject{Label: labels.SelectorFromSet(labels.Set{labelManagedBy: managedBy}), Transform: stripFieldSets}
	byObject := map[client.Object]cache.ByObject{}
	for _, obj := range childKinds() {
		byObject[obj] = ours
	}
	c, err := cache.New(mgr.GetConfig(), cache.Options{
		HTTPClient:                  mgr.GetHTTPClient(),
		Scheme:                      mgr.GetScheme(),
		Mapper:                      mgr.GetRESTMapper(),
		ByObject:                    byObject,
		DefaultNamespaces:           operator.CacheNamespaces(watchNamespaces),
		ReaderFailOnMissingInformer: true,
	})
	if err != nil {
		return nil, fmt.Errorf("creating the child cache: %w", err)
	}
	for _, obj := range childKinds() {
		if _, err := c.GetInformer(context.Background(), obj); err != nil {
			return nil, fmt.Errorf("the child cache's informer: %w", err)
		}
	}
	return c, nil
}

// stripFieldSets drops the field sets of an object's managedFields, most of their size, and
// keeps who manages it: ownedByLegacy reads the managers' names.
func stripFieldSets(in any) (any, error) {
	if obj, ok := in.(metav1.Object); ok {
		entries := obj.GetManagedFields()
		for i := range entries {
			entries[i].FieldsV1 = nil
		}
	}
	return in, nil
}
