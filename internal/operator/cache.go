package operator

import (
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// CacheNamespaces is the cache.Options.DefaultNamespaces of a cache limited to the watched
// namespaces (WATCH_NAMESPACE); nil, meaning all namespaces, when namespaces is empty.
func CacheNamespaces(namespaces []string) map[string]cache.Config {
	if len(namespaces) == 0 {
		return nil
	}
	out := make(map[string]cache.Config, len(namespaces))
	for _, ns := range namespaces {
		out[ns] = cache.Config{}
	}
	return out
}

// DeletionStarted passes the update that sets an object's deletionTimestamp. Or-ed with a
// predicate that ignores that update (GenerationChangedPredicate, LabelChangedPredicate), it
// still wakes the controller when deletion begins, for its finalizer work.
func DeletionStarted() predicate.Funcs {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		return e.ObjectOld.GetDeletionTimestamp() == nil && e.ObjectNew.GetDeletionTimestamp() != nil
	}}
}
