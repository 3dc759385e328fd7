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
	"github.com/quartet-operator/quartet/internal/scope"
	"github.com/quartet-operator/quartet/internal/status"
)

// Setup registers the controller: the mirrors, their children and the grants.
func (o *Options) Setup(mgr ctrl.Manager, shared scope.Namespaces) error {
	if err := o.complete(); err != nil {
		return err
	}
	// Both values are checked (complete): no error.
	probeAllowed, _ := o.probeAllowedPrefixes()
	images := ImagesFromEnv()
	images.AssignedUIDs, _ = o.assignedUIDs(func() bool {
		_, err := mgr.GetRESTMapper().RESTMapping(schema.GroupKind{Group: "security.openshift.io", Kind: "SecurityContextConstraints"})
		return err == nil
	})
	children, err := newChildCache(mgr, shared)
	if err != nil {
		return err
	}
	pods, err := newPodCache(mgr, shared)
	if err != nil {
		return err
	}
	c := client.WithFieldOwner(mgr.GetClient(), FieldOwner)
	r := &Reconciler{
		Client:          c,
		APIReader:       mgr.GetAPIReader(),
		Recorder:        mgr.GetEventRecorder(FieldOwner),
		Clock:           clock.RealClock{},
		Namespaces:      shared,
		Children:        children,
		Pods:            pods,
		Images:          images,
		HostsRoot:       o.HostsRoot,
		MaxPinnedImages: o.MaxPinnedImages,
		writer:          newStatusWriter(c, mgr.GetAPIReader()),
	}
	if o.Probes {
		r.Prober = NewHTTPProber(probeAllowed)
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named("registrymirror").
		// Generation changes only: the controller's own status writes do not wake it.
		For(&mirrorsv1alpha1.RegistryMirror{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: o.MaxConcurrentReconciles})
	// A child's change wakes its mirror; someone else's object is not watched (conflictRecheck).
	for _, obj := range childKinds() {
		b = b.WatchesRawSource(source.Kind[client.Object](children, obj,
			handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), &mirrorsv1alpha1.RegistryMirror{}, handler.OnlyControllerOwner())))
	}
	// A grant's change may give or take node access from the mirrors of its host.
	b = b.WatchesRawSource(source.Kind(mgr.GetCache(), &mirrorsv1alpha1.RegistryHostGrant{},
		handler.TypedEnqueueRequestsFromMapFunc(r.mirrorsOfGrant)))
	return b.Complete(r)
}

// newStatusWriter remembers its writes: a child's event starts a pass right after a status
// write, which the cache may not show yet.
func newStatusWriter(c client.Client, apiReader client.Reader) *status.Writer[*mirrorsv1alpha1.RegistryMirror] {
	return status.NewWriter(c, apiReader, func(m *mirrorsv1alpha1.RegistryMirror) *int64 { return &m.Status.ObservedGeneration },
		status.WithMemory[*mirrorsv1alpha1.RegistryMirror]())
}

// mirrorsOfGrant maps a RegistryHostGrant to the mirrors it may concern.
func (r *Reconciler) mirrorsOfGrant(ctx context.Context, grant *mirrorsv1alpha1.RegistryHostGrant) []reconcile.Request {
	var mirrors mirrorsv1alpha1.RegistryMirrorList
	if err := r.Client.List(ctx, &mirrors); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Failed to list RegistryMirrors for a RegistryHostGrant event", "registryHostGrant", grant.Name)
		return nil
	}
	var out []reconcile.Request
	for _, key := range mirrorsOfHost(grant, mirrors.Items) {
		out = append(out, reconcile.Request{NamespacedName: key})
	}
	return out
}

func childKinds() []client.Object {
	return []client.Object{&corev1.ConfigMap{}, &corev1.Service{}, &corev1.PersistentVolumeClaim{}, &appsv1.StatefulSet{},
		&appsv1.DaemonSet{}, &networkingv1.NetworkPolicy{}}
}

// newChildCache builds the cache of the mirrors' children: childKinds labelled managed-by
// quartet-registrymirror only, stripped (stripFieldSets); any other kind is refused.
func newChildCache(mgr ctrl.Manager, ns scope.Namespaces) (cache.Cache, error) {
	ours := cache.ByObject{Label: labels.SelectorFromSet(labels.Set{labelManagedBy: managedBy}), Transform: stripFieldSets}
	byObject := map[client.Object]cache.ByObject{}
	for _, obj := range childKinds() {
		byObject[obj] = ours
	}
	c, err := scope.NewCache(mgr, ns, "child", byObject, true)
	if err != nil {
		return nil, err
	}
	for _, obj := range childKinds() {
		if _, err := c.GetInformer(context.Background(), obj); err != nil {
			return nil, fmt.Errorf("the child cache's informer: %w", err)
		}
	}
	return c, nil
}

// stripFieldSets drops managedFields' field sets, keeping the managers (ownedByLegacy).
func stripFieldSets(in any) (any, error) {
	if obj, ok := in.(metav1.Object); ok {
		entries := obj.GetManagedFields()
		for i := range entries {
			entries[i].FieldsV1 = nil
		}
	}
	return in, nil
}
