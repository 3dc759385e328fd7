package registrymirror

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mirrorsv1alpha1 "github.com/quartet-operator/quartet/api/mirrors/v1alpha1"
	"github.com/quartet-operator/quartet/internal/operator"
)

// fieldOwner is the Server-Side Apply field manager of everything this controller writes.
const fieldOwner = "registrymirror"

// applyChild server-side applies child c's desired fields under the controller's field
// manager, taking them over from other managers. The server's response is written into
// c.desired (see roundTrip); an error is the API server's, for classifyApplyError.
func (r *Reconciler) applyChild(ctx context.Context, c child) error {
	return r.Apply(ctx, c.desired, client.FieldOwner(fieldOwner), client.ForceOwnership)
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
	return r.Patch(ctx, c.live, client.RawPatch(types.JSONPatchType, patch), client.FieldOwner(fieldOwner))
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
// 1 s progress hold is a batching choice, not a guess about the cache, and stays.
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
