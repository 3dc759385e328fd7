package exchangerate

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	operatorsv1 "github.com/quartet-operator/quartet/api/operators/v1"
	"github.com/quartet-operator/quartet/internal/operator"
)

// FieldOwner names this controller in the API server: the field manager of every write it
// makes (managedFields) and the reporting controller of its Events. Each controller's is
// quartet-<controller>.
const FieldOwner = "quartet-exchangerate"

// configMapAction is what applyConfigMap did.
type configMapAction int

const (
	configMapUnchanged configMapAction = iota
	configMapCreated
	// configMapUpdated: a spec change or a repair of someone else's edit.
	configMapUpdated
	// configMapRefreshed: a new table from the source, nothing else (routineUpdate).
	configMapRefreshed
)

// applyConfigMap creates or patches the ConfigMap to desired. A ConfigMap of that name
// that this ExchangeRate does not control is left alone (errConfigMapConflict).
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
	if existing.Labels == nil {
		existing.Labels = map[string]string{}
	}
	existing.Labels[managedByLabel] = managedByValue
	existing.Data = desired.Data
	existing.BinaryData = nil
	if err := r.Client.Patch(ctx, existing, patch, client.FieldOwner(FieldOwner)); err != nil {
		return configMapUnchanged, err
	}
	ctrl.LoggerFrom(ctx).Info("Updated ConfigMap", "configMap", klog.KObj(existing), "rate", desired.Data[KeyRate],
		"newPublicationOnly", action == configMapRefreshed)
	return action, nil
}

// writeStatus writes the status computeStatus makes of o, when it changed (see
// operator.WriteStatus: a conflict applies o again to the ExchangeRate read past the
// cache). An ExchangeRate deleted meanwhile is not an error.
func (r *Reconciler) writeStatus(ctx context.Context, xr *operatorsv1.ExchangeRate, o outcome) error {
	_, err := operator.WriteStatus(ctx, r.Client, r.APIReader, xr, func(x *operatorsv1.ExchangeRate) {
		x.Status = computeStatus(x.Status, o)
	})
	if client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("writing status: %w", err)
	}
	return nil
}
