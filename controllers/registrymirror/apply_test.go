package registrymirror

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	mirrorsv1alpha1 "github.com/quartet-operator/quartet/api/mirrors/v1alpha1"
)

// TestStatusBookLatest: a cached mirror that does not show the last write yet (an older
// resourceVersion) is replaced by that write; once the cache shows it, the cache is trusted.
func TestStatusBookLatest(t *testing.T) {
	key := types.NamespacedName{Namespace: "mirrors", Name: "docker-hub"}
	old := minimalMirror()
	old.ResourceVersion = "10"
	old.Status = mirrorsv1alpha1.RegistryMirrorStatus{Endpoint: "old"}
	written := old.DeepCopy()
	written.ResourceVersion = "11"
	written.Status = mirrorsv1alpha1.RegistryMirrorStatus{Endpoint: "new", Conditions: []metav1.Condition{{Type: mirrorsv1alpha1.ConditionReady}}}

	var b statusBook
	assert.Equal(t, "old", b.latest(old).Status.Endpoint, "nothing written yet")
	b.wrote(written)
	assert.Equal(t, "new", b.latest(old).Status.Endpoint, "the cache lags behind the write")
	caught := written.DeepCopy()
	caught.Status.Endpoint = "as cached"
	assert.Equal(t, "as cached", b.latest(caught).Status.Endpoint, "the cache shows the write")
	b.forget(key)
	assert.Equal(t, "old", b.latest(old).Status.Endpoint, "forgotten")
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
	b.wrote(minimalMirror())
	assert.Zero(t, b.heldFor(key, t0.Add(2*time.Second)), "a write ends the hold")
	b.hold(key, t0.Add(3*time.Second))
	b.release(key)
	assert.Zero(t, b.heldFor(key, t0.Add(4*time.Second)), "released")
	b.hold(key, t0.Add(5*time.Second))
	b.forget(key)
	assert.Zero(t, b.heldFor(key, t0.Add(6*time.Second)), "forgotten")
}
