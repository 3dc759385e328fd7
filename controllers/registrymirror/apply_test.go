package registrymirror

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	mirrorsv1alpha1 "github.com/quartet-operator/quartet/api/mirrors/v1alpha1"
)

// TestStatusBookStored: a cached mirror that does not show the last write yet is compared
// with that write; once the cache shows it, or cacheLag has passed, the cache is trusted.
func TestStatusBookStored(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	key := types.NamespacedName{Namespace: "mirrors", Name: "docker-hub"}
	old := minimalMirror()
	old.ResourceVersion = "10"
	old.Status = mirrorsv1alpha1.RegistryMirrorStatus{Endpoint: "old"}
	written := old.DeepCopy()
	written.ResourceVersion = "11"
	written.Status = mirrorsv1alpha1.RegistryMirrorStatus{Endpoint: "new", Conditions: []metav1.Condition{{Type: mirrorsv1alpha1.ConditionReady}}}

	var b statusBook
	assert.Equal(t, old.Status, b.stored(key, old, t0), "nothing written yet")

	b.wrote(key, written, t0)
	written.Status.Conditions[0].Reason = "changed after the write" // the book keeps its own copy

	st := b.stored(key, old, t0.Add(time.Second))
	assert.Equal(t, "new", st.Endpoint, "the cache lags behind the write")
	assert.Empty(t, st.Conditions[0].Reason)

	caught := written.DeepCopy()
	caught.Status.Endpoint = "as cached"
	assert.Equal(t, "as cached", b.stored(key, caught, t0.Add(time.Second)).Endpoint, "the cache shows the write")

	assert.Equal(t, "old", b.stored(key, old, t0.Add(cacheLag)).Endpoint, "after cacheLag the cache is trusted")

	recreated := old.DeepCopy()
	recreated.UID = "another"
	assert.Equal(t, "old", b.stored(key, recreated, t0.Add(time.Second)).Endpoint, "a mirror of the same name created again")

	b.forget(key)
	assert.Equal(t, "old", b.stored(key, old, t0.Add(time.Second)).Endpoint, "forgotten")
}

// TestStatusBookHold: a held-back change is timed from the first pass that held it back
// until a write or a release.
func TestStatusBookHold(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	key := types.NamespacedName{Namespace: "mirrors", Name: "docker-hub"}
	var b statusBook
	assert.Zero(t, b.heldFor(key, t0), "nothing held")
	b.hold(key, t0)
	b.hold(key, t0.Add(300*time.Millisecond))
	assert.Equal(t, 500*time.Millisecond, b.heldFor(key, t0.Add(500*time.Millisecond)), "held since the first hold")
	b.wrote(key, minimalMirror(), t0.Add(time.Second))
	assert.Zero(t, b.heldFor(key, t0.Add(2*time.Second)), "a write ends the hold")
	b.hold(key, t0.Add(3*time.Second))
	b.release(key)
	assert.Zero(t, b.heldFor(key, t0.Add(4*time.Second)), "released")
	b.hold(key, t0.Add(5*time.Second))
	b.forget(key)
	assert.Zero(t, b.heldFor(key, t0.Add(6*time.Second)), "forgotten")
}
