package operator

import (
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ManagerOptions are the manager options every Quartet manager shares, main.go's and the
// tests': a cache that strips managedFields and, with WATCH_NAMESPACE, holds only the
// watched namespaces, and a client that never caches Secrets (Copyrator reads the Secrets
// it needs through caches of its own). The shared cache holds Quartet's custom resources and
// the metadata of namespaces; the objects other controllers read across namespaces are in
// caches of their own, selected by label (Copyrator's copies, ExchangeRate's ConfigMaps, the
// mirrors' children). What a ChaosAgent's rounds read (started by the first round) is kept
// metadata-only (pods, ConfigMaps, namespaces) or stripped to what a round decides on
// (StripDeployment, StripHPA). RegistryMirror's pod cache (started by the first mirror with
// node access) is its own too, stripped to the pods' images.
func ManagerOptions(scheme *runtime.Scheme, shared Shared) ctrl.Options {
	cacheOpts := cache.Options{
		DefaultTransform:  cache.TransformStripManagedFields(),
		DefaultNamespaces: CacheNamespaces(shared.WatchNamespaces),
		ByObject: map[client.Object]cache.ByObject{
			&appsv1.Deployment{}:                     {Transform: StripDeployment},
			&autoscalingv2.HorizontalPodAutoscaler{}: {Transform: StripHPA},
		},
	}
	return ctrl.Options{
		Scheme: scheme,
		Cache:  cacheOpts,
		Client: client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}},
	}
}

// StripDeployment keeps of a Deployment what a ChaosAgent's round reads (metadata without
// managed fields, spec.replicas and spec.selector) and drops the pod template and status,
// the bulk of it.
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

// StripHPA keeps of a HorizontalPodAutoscaler its metadata (without managed fields) and the
// target it scales.
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
