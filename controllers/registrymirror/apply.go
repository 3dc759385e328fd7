package registrymirror

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	mirrorsv1alpha1 "github.com/quartet-operator/quartet/api/mirrors/v1alpha1"
	"github.com/quartet-operator/quartet/internal/operator"
)

// FieldOwner names this controller in the API server: the field manager of every write it
// makes (managedFields) and the reporting controller of its Events. Each controller's is
// quartet-<controller>.
const FieldOwner = "quartet-registrymirror"

// legacyFieldOwner is the field manager this controller applied its children under before
// FieldOwner; adoptLegacyFields moves what it owns to FieldOwner.
const legacyFieldOwner = "registrymirror"

// applyChild server-side applies child c's desired fields under the controller's field
// manager, taking them over from other managers. The server's response is written into
// c.desired (see roundTrip); an error is the API server's, for classifyApplyError.
func (r *Reconciler) applyChild(ctx context.Context, c child) error {
	return r.Client.Apply(ctx, c.desired, client.FieldOwner(FieldOwner), client.ForceOwnership)
}

// ownedByLegacy reports whether legacyFieldOwner manages fields of obj (the child cache
// keeps the managers' names, see stripFieldSets).
func ownedByLegacy(obj metav1.Object) bool {
	return slices.ContainsFunc(obj.GetManagedFields(), func(e metav1.ManagedFieldsEntry) bool { return e.Manager == legacyFieldOwner })
}

// adoptLegacyFields gives FieldOwner the fields legacyFieldOwner owns on child obj, read
// afresh from the API server; obj becomes the object written. A forced apply under the new
// name would not take them: a field both managers set to the same value is shared, so the
// old manager would keep it, and a field the controller later stops setting would stay on
// the object. The managedFields are rewritten under an optimistic lock.
func (r *Reconciler) adoptLegacyFields(ctx context.Context, obj client.Object) error {
	key := client.ObjectKeyFromObject(obj)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := r.APIReader.Get(ctx, key, obj); err != nil {
			return err
		}
		entries, legacy, err := adoptLegacyEntries(obj.GetManagedFields())
		if err != nil || !legacy {
			return err
		}
		base, ok := obj.DeepCopyObject().(client.Object)
		if !ok {
			return fmt.Errorf("%T is not a client.Object", obj)
		}
		obj.SetManagedFields(entries)
		return r.Client.Patch(ctx, obj, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
	})
}

// adoptLegacyEntries returns entries with every entry of legacyFieldOwner given to
// FieldOwner: its fields join FieldOwner's entry of the same operation, subresource and
// API version, or the entry is renamed when FieldOwner has none. legacy says whether there
// was any.
func adoptLegacyEntries(entries []metav1.ManagedFieldsEntry) (out []metav1.ManagedFieldsEntry, legacy bool, err error) {
	out = make([]metav1.ManagedFieldsEntry, 0, len(entries))
	for _, e := range entries {
		if e.Manager != legacyFieldOwner {
			out = append(out, *e.DeepCopy())
		}
	}
	for _, e := range entries {
		if e.Manager != legacyFieldOwner {
			continue
		}
		legacy = true
		i := slices.IndexFunc(out, func(o metav1.ManagedFieldsEntry) bool {
			return o.Manager == FieldOwner && o.Operation == e.Operation && o.Subresource == e.Subresource && o.APIVersion == e.APIVersion
		})
		if i < 0 {
			renamed := *e.DeepCopy()
			renamed.Manager = FieldOwner
			out = append(out, renamed)
			continue
		}
		if out[i].FieldsV1, err = unionFields(out[i].FieldsV1, e.FieldsV1); err != nil {
			return nil, false, fmt.Errorf("merging the fields of %s %s: %w", e.Manager, e.Operation, err)
		}
	}
	return out, legacy, nil
}

// unionFields is the set of fields in a or b.
func unionFields(a, b *metav1.FieldsV1) (*metav1.FieldsV1, error) {
	set := func(f *metav1.FieldsV1) (*fieldpath.Set, error) {
		s := &fieldpath.Set{}
		if f == nil || len(f.GetRawBytes()) == 0 {
			return s, nil
		}
		return s, s.FromJSON(bytes.NewReader(f.GetRawBytes()))
	}
	sa, err := set(a)
	if err != nil {
		return nil, err
	}
	sb, err := set(b)
	if err != nil {
		return nil, err
	}
	raw, err := sa.Union(sb).ToJSON()
	if err != nil {
		return nil, err
	}
	return metav1.NewFieldsV1(string(raw)), nil
}

// revertChild replaces, with a JSON patch guarded by the child's UID, the part of the
// live child that drift found changed by others with the desired one: the whole pod
// template of a StatefulSet or DaemonSet, a Service's selector. The API server defaults
// what the desired part leaves out, so the result is what a fresh apply would create.
func (r *Reconciler) revertChild(ctx context.Context, c child) error {
	var path string
	var value any
	switch c.live.(type) {
	case *appsv1.StatefulSet:
		want := &appsv1.StatefulSet{}
		if err := roundTrip(c.desired, want); err != nil {
			return err
		}
		path, value = "/spec/template", want.Spec.Template
	case *appsv1.DaemonSet:
		want := &appsv1.DaemonSet{}
		if err := roundTrip(c.desired, want); err != nil {
			return err
		}
		path, value = "/spec/template", want.Spec.Template
	case *corev1.Service:
		want := &corev1.Service{}
		if err := roundTrip(c.desired, want); err != nil {
			return err
		}
		path, value = "/spec/selector", want.Spec.Selector
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

// writeStatus writes the status computeStatus makes of the pass's outcome o to stored, the
// mirror as the API server has it as far as this process knows (statusBook.latest):
// operator.WriteStatus, whose conflict computes the status again from the mirror read past
// the cache. m is the mirror the pass acted on: its spec and generation, not a newer one a
// conflict finds, are what the status describes. A write ends any hold.
func (r *Reconciler) writeStatus(ctx context.Context, m, stored *mirrorsv1alpha1.RegistryMirror, o outcome, now metav1.Time) error {
	written, err := operator.WriteStatus(ctx, r.Client, r.APIReader, stored, func(live *mirrorsv1alpha1.RegistryMirror) {
		acted := m.DeepCopy()
		acted.Status = live.Status
		live.Status = computeStatus(acted, o, now)
	})
	if err != nil {
		return err
	}
	if written != "" {
		r.statuses.wrote(stored)
	}
	return nil
}

// statusBook remembers, per mirror, the mirror as this process last wrote its status and
// since when a progress-only change has been held back (see decideStatusWrite). A pass
// that a child's event starts right after a status write often reads the mirror from a
// cache that does not show the write yet; comparing with that older status would write
// the same status again. The written mirror is used for exactly as long as the cache is
// behind it by resourceVersion (operator.StatusMemory), no longer a guessed 10 s; the
// 5 s progress hold is a batching choice, not a guess about the cache, and stays.
type statusBook struct {
	writes operator.StatusMemory[*mirrorsv1alpha1.RegistryMirror]
	mu     sync.Mutex
	held   map[types.NamespacedName]time.Time
}

// latest returns the mirror as the API server has it as far as this process knows: the
// one it wrote last while the cached m is older than that write, else m.
func (b *statusBook) latest(m *mirrorsv1alpha1.RegistryMirror) *mirrorsv1alpha1.RegistryMirror {
	return b.writes.Latest(m)
}

// wrote notes m, as the API server returned it from a status write; nothing is held back
// any more.
func (b *statusBook) wrote(m *mirrorsv1alpha1.RegistryMirror) {
	b.writes.Wrote(m)
	b.release(client.ObjectKeyFromObject(m))
}

// hold notes that a progress-only change is held back, from now unless one already was.
func (b *statusBook) hold(key types.NamespacedName, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.held == nil {
		b.held = map[types.NamespacedName]time.Time{}
	}
	if _, ok := b.held[key]; !ok {
		b.held[key] = now
	}
}

// heldFor is how long a progress-only change has been held back (0 when none is).
func (b *statusBook) heldFor(key types.NamespacedName, now time.Time) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	if since, ok := b.held[key]; ok {
		return now.Sub(since)
	}
	return 0
}

// release notes that nothing is held back: the status is as it should be.
func (b *statusBook) release(key types.NamespacedName) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.held, key)
}

// forget drops a deleted mirror.
func (b *statusBook) forget(key types.NamespacedName) {
	b.writes.Forget(key)
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.held, key)
}

// roundTrip copies an apply configuration filled from the server's response into a
// typed object, replacing whatever the object held.
func roundTrip(from any, into client.Object) error {
	b, err := json.Marshal(from)
	if err != nil {
		return err
	}
	v := reflect.ValueOf(into).Elem()
	v.Set(reflect.Zero(v.Type()))
	return json.Unmarshal(b, into)
}

// removeExtraReplicas deletes the StatefulSets, then the cache volumes, of registry
// replicas at or above spec.replicas (extraReplicas), each by UID: a mirror that shrinks
// gives back their volumes, and their cached content goes with them.
func (r *Reconciler) removeExtraReplicas(ctx context.Context, m *mirrorsv1alpha1.RegistryMirror) error {
	ours := []client.ListOption{client.InNamespace(m.Namespace), client.HasLabels{labelReplica},
		client.MatchingLabels{labelManagedBy: managedBy, labelInstance: m.Name, labelComponent: componentReg}}
	var stss appsv1.StatefulSetList
	if err := r.Children.List(ctx, &stss, ours...); err != nil {
		return fmt.Errorf("listing registry StatefulSets: %w", err)
	}
	var pvcs corev1.PersistentVolumeClaimList
	if err := r.Children.List(ctx, &pvcs, ours...); err != nil {
		return fmt.Errorf("listing cache volumes: %w", err)
	}
	objs := make([]client.Object, 0, len(stss.Items)+len(pvcs.Items))
	for i := range stss.Items {
		objs = append(objs, &stss.Items[i])
	}
	for i := range pvcs.Items {
		objs = append(objs, &pvcs.Items[i])
	}
	for _, o := range extraReplicas(m, objs) {
		kind := "StatefulSet"
		if _, ok := o.(*corev1.PersistentVolumeClaim); ok {
			kind = "PersistentVolumeClaim"
		}
		uid := o.GetUID()
		if err := r.Client.Delete(ctx, o, client.Preconditions{UID: &uid}); err != nil {
			if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
				continue
			}
			objectWrites.WithLabelValues(kind, "failed").Inc()
			return fmt.Errorf("deleting %s %s/%s: %w", kind, o.GetNamespace(), o.GetName(), err)
		}
		objectWrites.WithLabelValues(kind, "deleted").Inc()
		ctrl.LoggerFrom(ctx).Info("Deleted "+kind+" of a registry replica above spec.replicas", "object", klog.KObj(o), "replicas", replicas(m))
		r.Recorder.Eventf(m, o, corev1.EventTypeNormal, EventDeleted, "Delete",
			"Deleted %s %s/%s: spec.replicas is %d, and its replica is no longer one of them", kind, o.GetNamespace(), o.GetName(), replicas(m))
	}
	return nil
}

// extraReplicas are the objects of objs (registry StatefulSets and cache volumes carrying
// the replica label) that this mirror controls and whose replica is at or above
// spec.replicas, in the order given; not those already being deleted (a volume waits for
// its pod to go).
func extraReplicas(m *mirrorsv1alpha1.RegistryMirror, objs []client.Object) []client.Object {
	var out []client.Object
	for _, o := range objs {
		i, err := strconv.Atoi(o.GetLabels()[labelReplica])
		if err != nil || i < 1 || !metav1.IsControlledBy(o, m) || o.GetDeletionTimestamp() != nil {
			continue
		}
		if int64(i) >= int64(replicas(m)) {
			out = append(out, o)
		}
	}
	return out
}
