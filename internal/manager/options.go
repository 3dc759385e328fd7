// Package manager holds how every Quartet manager is made, main.go's and the tests': its
// cache and client options, its client-side request limits, and the flags it reads from
// the environment.
package manager

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quartet-operator/quartet/internal/scope"
)

// Options are the manager options every Quartet manager shares: a cache that strips
// managedFields and, with WATCH_NAMESPACE, holds only the watched namespaces, and a client
// that never caches Secrets (Copyrator reads the Secrets it needs through caches of its
// own). The shared cache holds Quartet's custom resources and the metadata of namespaces;
// the objects other controllers read across namespaces are in caches of their own,
// selected by label (scope.NewCache). byObject adds what a controller's reads of the shared
// cache need (ChaosAgent's transforms and its Running-pods field selector, chaosagent.CacheOptions).
func Options(scheme *runtime.Scheme, ns scope.Namespaces, byObject ...map[client.Object]cache.ByObject) ctrl.Options {
	cacheOpts := cache.Options{
		DefaultTransform:  cache.TransformStripManagedFields(),
		DefaultNamespaces: ns.CacheConfig(),
		ByObject:          map[client.Object]cache.ByObject{},
	}
	for _, b := range byObject {
		maps.Copy(cacheOpts.ByObject, b)
	}
	return ctrl.Options{
		Scheme: scheme,
		Cache:  cacheOpts,
		Client: client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}},
	}
}
