package operator

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ManagerOptions are the manager options every Quartet manager shares, main.go's and the
// tests': a cache that strips managedFields and, with WATCH_NAMESPACE, holds only the
// watched namespaces, and a client that never caches Secrets (Copyrator watches the Secrets
// it needs through label-selected informers of its own).
func ManagerOptions(scheme *runtime.Scheme, shared Shared) ctrl.Options {
	cacheOpts := cache.Options{
		DefaultTransform:  cache.TransformStripManagedFields(),
		DefaultNamespaces: CacheNamespaces(shared.WatchNamespaces),
	}
	return ctrl.Options{
		Scheme: scheme,
		Cache:  cacheOpts,
		Client: client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}},
	}
}
