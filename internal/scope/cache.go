package scope

import (
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// NewCache is the one constructor of a controller's own cache, for objects the manager's
// cache must not hold whole (every ConfigMap of the cluster, say): only the kinds in
// byObject, each selected (by label or field) and transformed as given there, in the
// watched namespaces only, and added to mgr so it starts and stops with it. name says
// what it holds, for errors. With failOnMissing, reading a kind not in byObject is an
// error instead of a new informer (cache.Options.ReaderFailOnMissingInformer).
func NewCache(mgr ctrl.Manager, ns Namespaces, name string, byObject map[client.Object]cache.ByObject, failOnMissing bool) (cache.Cache, error) {
	c, err := cache.New(mgr.GetConfig(), cache.Options{
		HTTPClient:                  mgr.GetHTTPClient(),
		Scheme:                      mgr.GetScheme(),
		Mapper:                      mgr.GetRESTMapper(),
		ByObject:                    byObject,
		DefaultNamespaces:           ns.CacheConfig(),
		ReaderFailOnMissingInformer: failOnMissing,
	})
	if err != nil {
		return nil, fmt.Errorf("creating the %s cache: %w", name, err)
	}
	if err := mgr.Add(c); err != nil {
		return nil, fmt.Errorf("adding the %s cache: %w", name, err)
	}
	return c, nil
}

// DeletionStarted passes the update that sets an object's deletionTimestamp. Or-ed with a
// predicate that ignores that update (GenerationChangedPredicate, LabelChangedPredicate), it
// still wakes the controller when deletion begins, for its finalizer work.
func DeletionStarted() predicate.Funcs {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		return e.ObjectOld.GetDeletionTimestamp() == nil && e.ObjectNew.GetDeletionTimestamp() != nil
	}}
}
