package registrymirror

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mirrorsv1alpha1 "github.com/quartet-operator/quartet/api/mirrors/v1alpha1"
	"github.com/quartet-operator/quartet/internal/scope"
	"github.com/quartet-operator/quartet/test/testenv"
)

// TestStatusBookLatest: a cached mirror that does not show the last write yet (an older
// resourceVersion) is replaced by that write; once the cache shows it, the cache is trusted.
// (The book is the status writer's memory now, status.WithMemory: newStatusWriter.)
func TestStatusBookLatest(t *testing.T) {
	env.Require(t)
	ctx := context.Background()
	m := newMirror(newNamespace(t), "docker-hub", "https://registry-1.docker.io", "")
	require.NoError(t, env.Client.Create(ctx, m))
	key := client.ObjectKeyFromObject(m)
	old := m.DeepCopy()
	old.Status = mirrorsv1alpha1.RegistryMirrorStatus{Endpoint: "old"}

	w := newStatusWriter(env.Client, env.Client)
	assert.Equal(t, "old", w.Latest(old).Status.Endpoint, "nothing written yet")
	_, err := w.Finish(ctx, m, true, func(x *mirrorsv1alpha1.RegistryMirror) {
		x.Status.Endpoint = "new"
	})
	require.NoError(t, err)
	require.NotEqual(t, old.ResourceVersion, m.ResourceVersion, "written")
	assert.Equal(t, "new", w.Latest(old).Status.Endpoint, "the cache lags behind the write")
	caught := m.DeepCopy()
	caught.Status.Endpoint = "as cached"
	assert.Equal(t, "as cached", w.Latest(caught).Status.Endpoint, "the cache shows the write")
	w.Forget(key)
	assert.Equal(t, "old", w.Latest(old).Status.Endpoint, "forgotten")
}

// TestStatusBookHold: a held-back change is timed from the first pass that held it back
// until a release (finish releases it on every pass that holds nothing back, a write among
// them) or the mirror is forgotten.
func TestStatusBookHold(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	key := types.NamespacedName{Namespace: "mirrors", Name: "docker-hub"}
	var b memory
	assert.Zero(t, b.heldFor(key, t0), "nothing held")
	b.hold(key, t0)
	b.hold(key, t0.Add(300*time.Millisecond))
	assert.Equal(t, 500*time.Millisecond, b.heldFor(key, t0.Add(500*time.Millisecond)), "held since the first hold")
	b.release(key)
	assert.Zero(t, b.heldFor(key, t0.Add(2*time.Second)), "a write ends the hold")
	b.hold(key, t0.Add(3*time.Second))
	b.release(key)
	assert.Zero(t, b.heldFor(key, t0.Add(4*time.Second)), "released")
	b.hold(key, t0.Add(5*time.Second))
	b.forget(key)
	assert.Zero(t, b.heldFor(key, t0.Add(6*time.Second)), "forgotten")
}

func TestAdoptLegacyEntries(t *testing.T) {
	entry := func(manager string, op metav1.ManagedFieldsOperationType, raw string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: op, APIVersion: "v1", FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(raw)}
	}
	apply, update := metav1.ManagedFieldsOperationApply, metav1.ManagedFieldsOperationUpdate
	for _, tc := range []struct {
		name   string
		in     []metav1.ManagedFieldsEntry
		want   []metav1.ManagedFieldsEntry
		legacy bool
	}{
		{"none", []metav1.ManagedFieldsEntry{entry(FieldOwner, apply, `{"f:data":{}}`), entry("kubectl", update, `{"f:x":{}}`)},
			[]metav1.ManagedFieldsEntry{entry(FieldOwner, apply, `{"f:data":{}}`), entry("kubectl", update, `{"f:x":{}}`)}, false},
		{"shared fields join ours",
			[]metav1.ManagedFieldsEntry{entry(FieldOwner, apply, `{"f:data":{"f:a":{}}}`), entry(legacyFieldOwner, apply, `{"f:data":{"f:a":{},"f:b":{}}}`)},
			[]metav1.ManagedFieldsEntry{entry(FieldOwner, apply, `{"f:data":{"f:a":{},"f:b":{}}}`)}, true},
		{"renamed when ours has no entry of that operation",
			[]metav1.ManagedFieldsEntry{entry("kubectl", update, `{"f:x":{}}`), entry(FieldOwner, apply, `{"f:data":{}}`), entry(legacyFieldOwner, update, `{"f:spec":{}}`)},
			[]metav1.ManagedFieldsEntry{entry("kubectl", update, `{"f:x":{}}`), entry(FieldOwner, apply, `{"f:data":{}}`), entry(FieldOwner, update, `{"f:spec":{}}`)}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, legacy, err := adoptLegacyEntries(tc.in)
			require.NoError(t, err)
			assert.Equal(t, tc.legacy, legacy)
			assert.Equal(t, tc.want, got)
		})
	}
}

// TestLegacyFieldOwnerIsAdopted: children applied under the old field manager name end,
// after one pass of this version, with no managedFields entry of it, its fields owned by
// FieldOwner. (A forced apply under the new name alone would not do it: the first subtest
// shows the API server sharing fields set to the same value.)
func TestLegacyFieldOwnerIsAdopted(t *testing.T) {
	env.Require(t)
	ctx := context.Background()
	ns := newNamespace(t)

	t.Run("a forced apply under a new name shares the fields", func(t *testing.T) {
		cm := func() *corev1ac.ConfigMapApplyConfiguration {
			return corev1ac.ConfigMap("shared", ns).WithData(map[string]string{"k": "v"})
		}
		require.NoError(t, env.Client.Apply(ctx, cm(), client.FieldOwner(legacyFieldOwner), client.ForceOwnership))
		require.NoError(t, env.Client.Apply(ctx, cm(), client.FieldOwner(FieldOwner), client.ForceOwnership))
		live := &corev1.ConfigMap{}
		require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "shared"}, live))
		assert.ElementsMatch(t, []string{legacyFieldOwner, FieldOwner}, managers(live.ManagedFields))
	})

	m := newMirror(ns, "legacy", "https://quay.io", "")
	require.NoError(t, env.Client.Create(ctx, m))
	stop := testenv.StartManager(t, env.Config, scope.Namespaces{}, (&Options{MaxConcurrentReconciles: 1}).Setup)
	var kids map[string]client.Object
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		m = getMirror(c, client.ObjectKeyFromObject(m))
		kids = children(c, m)
		for key, obj := range kids {
			if key == "DaemonSet/"+daemonSetName(m) {
				continue // no node access asked for
			}
			if assert.NotNil(c, obj, key) {
				assert.Contains(c, managers(obj.GetManagedFields()), FieldOwner, key)
			}
		}
	}, wait, tick)
	stop()

	// What the previous version left: the same fields applied under the old name. The
	// children are up to date, so this version has no reason to apply them again.
	legacySets := map[string]string{}
	for key, obj := range kids {
		if obj == nil {
			continue
		}
		require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
				return err
			}
			entries := obj.GetManagedFields()
			for i := range entries {
				if entries[i].Manager == FieldOwner {
					entries[i].Manager = legacyFieldOwner
				}
				if entries[i].Manager == legacyFieldOwner && entries[i].Operation == metav1.ManagedFieldsOperationApply {
					legacySets[key] = entries[i].FieldsV1.GetRawString()
				}
			}
			obj.SetManagedFields(entries)
			return env.Client.Update(ctx, obj)
		}))
		require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj))
		require.Contains(t, managers(obj.GetManagedFields()), legacyFieldOwner, key)
		require.NotContains(t, managers(obj.GetManagedFields()), FieldOwner, key)
	}
	require.Len(t, legacySets, 5, "ConfigMap, two Services, PVC, StatefulSet")

	startManager(t, env.Config, scope.Namespaces{}, 1)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for key, obj := range children(c, m) {
			if obj == nil {
				continue
			}
			assert.NotContains(c, managers(obj.GetManagedFields()), legacyFieldOwner, key)
			for _, e := range obj.GetManagedFields() {
				if e.Manager == FieldOwner && e.Operation == metav1.ManagedFieldsOperationApply {
					union, err := unionFields(e.FieldsV1, metav1.NewFieldsV1(legacySets[key]))
					if assert.NoError(c, err) {
						assert.JSONEq(c, e.FieldsV1.GetRawString(), union.GetRawString(), "%s: every field the old manager owned is ours", key)
					}
				}
			}
		}
	}, wait, tick)
}

// managers lists the field managers of entries, one per entry.
func managers(entries []metav1.ManagedFieldsEntry) []string {
	out := make([]string, 0, len(entries))
	for _, e := range entries {
		out = append(out, e.Manager)
	}
	return out
}
