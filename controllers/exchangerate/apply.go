package exchangerate

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	operatorsv1 "github.com/quartet-operator/quartet/api/operators/v1"
)

// FieldOwner is this controller's field manager and Events' reporting controller.
const FieldOwner = "quartet-exchangerate"

// configMapAction is what applyConfigMap did.
type configMapAction int

const (
	configMapUnchanged configMapAction = iota
	configMapCreated
	configMapUpdated   // a spec change, a failover or a repair of someone else's edit
	configMapRefreshed // a new publication, nothing else (routineUpdate)
)

// applyConfigMap creates or patches the ConfigMap to desired, unless someone else's.
func (r *Reconciler) applyConfigMap(ctx context.Context, xr *operatorsv1.ExchangeRate, desired *corev1.ConfigMap) (configMapAction, error) {
	existing := &corev1.ConfigMap{}
	err := r.ConfigMaps.Get(ctx, client.ObjectKeyFromObject(desired), existing)
	if apierrors.IsNotFound(err) {
		err = r.Client.Create(ctx, desired, client.FieldOwner(FieldOwner))
		if err == nil {
			ctrl.LoggerFrom(ctx).Info("Created ConfigMap", "configMap", klog.KObj(desired), "rate", desired.Data[KeyRate])
			return configMapCreated, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return configMapUnchanged, err
		}
		// Not in our cache: either unlabelled (someone else's) or too new for the cache.
		err = r.APIReader.Get(ctx, client.ObjectKeyFromObject(desired), existing)
	}
	if err != nil {
		return configMapUnchanged, err
	}
	if !controlledBy(existing, xr) {
		return configMapUnchanged, errConfigMapConflict
	}
	if configMapUpToDate(existing, desired, xr) {
		return configMapUnchanged, nil
	}
	action := configMapUpdated
	if routineUpdate(existing, desired, xr) {
		action = configMapRefreshed
	}
	patch := client.MergeFrom(existing.DeepCopy())
	metav1.SetMetaDataLabel(&existing.ObjectMeta, managedByLabel, managedByValue)
	existing.Data = desired.Data
	existing.BinaryData = nil
	if err := r.Client.Patch(ctx, existing, patch, client.FieldOwner(FieldOwner)); err != nil {
		return configMapUnchanged, err
	}
	ctrl.LoggerFrom(ctx).Info("Updated ConfigMap", "configMap", klog.KObj(existing), "rate", desired.Data[KeyRate],
		"newPublicationOnly", action == configMapRefreshed)
	return action, nil
}
