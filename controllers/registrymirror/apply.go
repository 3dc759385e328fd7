package registrymirror

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mirrorsv1alpha1 "github.com/quartet-operator/quartet/api/mirrors/v1alpha1"
)

// FieldOwner is the field manager of every write and the reporting controller of Events.
const FieldOwner = "quartet-registrymirror"

// applyChild applies child c and reports the write; a refusal is a problem, not an error.
func (r *Reconciler) applyChild(ctx context.Context, m *mirrorsv1alpha1.RegistryMirror, c child, exists, create bool) (childResult, error) {
	key := types.NamespacedName{Namespace: m.Namespace, Name: c.name}
	if err := r.Client.Apply(ctx, c.desired, client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		switch classifyApplyError(err) {
		case applyNamespaceTerminating:
			return childResult{terminating: true}, nil
		case applyRefused:
			objectWrites.WithLabelValues(c.kind, "refused").Inc()
			res := childResult{problem: &problem{mirrorsv1alpha1.ReasonApplyFailed, fmt.Sprintf("applying %s %s was refused: %v", c.kind, key, err)}}
			if exists {
				res.live = c.live
			}
			return res, nil
		default:
			objectWrites.WithLabelValues(c.kind, "failed").Inc()
			return childResult{problem: &problem{mirrorsv1alpha1.ReasonApplyFailed, fmt.Sprintf("applying %s %s failed: %v", c.kind, key, err)}},
				fmt.Errorf("applying %s %s: %w", c.kind, key, err)
		}
	}
	// The apply response (written into the apply configuration) is the live object.
	if err := roundTrip(c.desired, c.live); err != nil {
		return childResult{}, fmt.Errorf("decoding the applied %s %s: %w", c.kind, key, err)
	}
	verb, action := EventUpdated, "Update"
	if create {
		verb, action = EventCreated, "Create"
	}
	objectWrites.WithLabelValues(c.kind, strings.ToLower(verb)).Inc()
	logChild(ctx, verb+" "+c.kind, c)
	r.Recorder.Eventf(m, c.live, corev1.EventTypeNormal, verb, action, "%s %s %s", verb, c.kind, key)
	return childResult{live: c.live}, nil
}

// revertChild replaces the part of c with others' additions (drift) with the desired one.
func (r *Reconciler) revertChild(ctx context.Context, m *mirrorsv1alpha1.RegistryMirror, c child) error {
	fields := strings.Join(drift(c), ", ")
	if err := r.patchDrift(ctx, c); err != nil {
		objectWrites.WithLabelValues(c.kind, "failed").Inc()
		return fmt.Errorf("reverting %s of %s %s/%s failed: %w", fields, c.kind, m.Namespace, c.name, err)
	}
	objectWrites.WithLabelValues(c.kind, "reverted").Inc()
	logChild(ctx, "Reverted changes by others", c, "fields", fields)
	r.Recorder.Eventf(m, c.live, corev1.EventTypeWarning, EventReverted, "Revert",
		"Reverted %s of %s %s/%s: the operator's objects carry only what it sets", fields, c.kind, m.Namespace, c.name)
	return nil
}

func (r *Reconciler) patchDrift(ctx context.Context, c child) error {
	want := c.live.DeepCopyObject().(client.Object) // roundTrip empties it first
	if err := roundTrip(c.desired, want); err != nil {
		return err
	}
	var path string
	var value any
	switch w := want.(type) {
	case *appsv1.StatefulSet:
		path, value = "/spec/template", w.Spec.Template
	case *appsv1.DaemonSet:
		path, value = "/spec/template", w.Spec.Template
	case *corev1.Service:
		path, value = "/spec/selector", w.Spec.Selector
	default:
		return fmt.Errorf("no revert for %T", c.live)
	}
	patch, err := json.Marshal([]map[string]any{
		{"op": "test", "path": "/metadata/uid", "value": c.live.GetUID()},
		{"op": "replace", "path": path, "value": value},
	})
	if err != nil {
		return err
	}
	return r.Client.Patch(ctx, c.live, client.RawPatch(types.JSONPatchType, patch), client.FieldOwner(FieldOwner))
}

// logChild logs msg about child c, Kubernetes style ("statefulSet", klog.KObj).
func logChild(ctx context.Context, msg string, c child, kv ...any) {
	kind := strings.ToLower(c.kind[:1]) + c.kind[1:]
	ctrl.LoggerFrom(ctx).Info(msg, append([]any{kind, klog.KObj(c.live)}, kv...)...) //nolint:loggercheck // the kind is the key
}

// removeChild deletes the mirror's child kind/name (read into obj) if it has one.
func (r *Reconciler) removeChild(ctx context.Context, m *mirrorsv1alpha1.RegistryMirror, obj client.Object, kind, name string) (bool, error) {
	if err := r.Children.Get(ctx, types.NamespacedName{Namespace: m.Namespace, Name: name}, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("reading %s %s/%s: %w", kind, m.Namespace, name, err)
	}
	if !metav1.IsControlledBy(obj, m) {
		return false, nil
	}
	return r.deleteChild(ctx, obj, kind)
}

// deleteChild deletes obj by UID (not an object made meanwhile under its name).
func (r *Reconciler) deleteChild(ctx context.Context, obj client.Object, kind string) (bool, error) {
	if err := r.Client.Delete(ctx, obj, client.Preconditions{UID: ptr.To(obj.GetUID())}); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return false, nil
		}
		objectWrites.WithLabelValues(kind, "failed").Inc()
		return false, fmt.Errorf("deleting %s %s/%s: %w", kind, obj.GetNamespace(), obj.GetName(), err)
	}
	objectWrites.WithLabelValues(kind, "deleted").Inc()
	return true, nil
}

// removeExtraReplicas deletes the StatefulSets, then the volumes, of extraReplicas.
func (r *Reconciler) removeExtraReplicas(ctx context.Context, m *mirrorsv1alpha1.RegistryMirror) error {
	ours := []client.ListOption{client.InNamespace(m.Namespace), client.HasLabels{labelReplica},
		client.MatchingLabels{labelManagedBy: managedBy, labelInstance: m.Name, labelComponent: componentReg}}
	var objs []client.Object
	for _, list := range []client.ObjectList{&appsv1.StatefulSetList{}, &corev1.PersistentVolumeClaimList{}} {
		if err := r.Children.List(ctx, list, ours...); err != nil {
			return fmt.Errorf("listing the registry replicas' objects: %w", err)
		}
		err := meta.EachListItem(list, func(o runtime.Object) error { objs = append(objs, o.(client.Object)); return nil })
		if err != nil {
			return err
		}
	}
	for _, o := range extraReplicas(m, objs) {
		kind := reflect.TypeOf(o).Elem().Name() // StatefulSet or PersistentVolumeClaim
		if deleted, err := r.deleteChild(ctx, o, kind); err != nil {
			return err
		} else if deleted {
			ctrl.LoggerFrom(ctx).Info("Deleted "+kind+" of a registry replica above spec.replicas", "object", klog.KObj(o), "replicas", replicas(m))
			r.Recorder.Eventf(m, o, corev1.EventTypeNormal, EventDeleted, "Delete",
				"Deleted %s %s/%s: spec.replicas is %d, and its replica is no longer one of them", kind, o.GetNamespace(), o.GetName(), replicas(m))
		}
	}
	return nil
}

// roundTrip copies an apply configuration into a typed object, replacing what it held.
func roundTrip(from any, into client.Object) error {
	b, err := json.Marshal(from)
	if err != nil {
		return err
	}
	v := reflect.ValueOf(into).Elem()
	v.Set(reflect.Zero(v.Type()))
	return json.Unmarshal(b, into)
}
