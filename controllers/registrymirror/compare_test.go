package registrymirror

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

func TestSubset(t *testing.T) {
	for _, tc := range []struct {
		name       string
		want, have any
		ok         bool
	}{
		{"equal scalars", "a", "a", true},
		{"different scalars", "a", "b", false},
		{"numbers", 5000.0, 5000.0, true},
		{"extra keys in live are fine", map[string]any{"a": 1.0}, map[string]any{"a": 1.0, "b": 2.0}, true},
		{"missing key", map[string]any{"a": 1.0}, map[string]any{"b": 1.0}, false},
		{"nested difference", map[string]any{"a": map[string]any{"b": "x"}}, map[string]any{"a": map[string]any{"b": "y"}}, false},
		{"list elementwise subset", []any{map[string]any{"n": "a"}}, []any{map[string]any{"n": "a", "d": "x"}}, true},
		{"list length differs", []any{"a"}, []any{"a", "b"}, false},
		{"list order matters", []any{"a", "b"}, []any{"b", "a"}, false},
		{"type differs", map[string]any{}, []any{}, false},
		{"false explicit vs absent", map[string]any{"f": false}, map[string]any{}, false},
	} {
		assert.Equal(t, tc.ok, subset(tc.want, tc.have), tc.name)
	}
}

// TestNeedsApply covers the decisions that keep steady-state passes write-free while
// still correcting drift and removing fields the operator stopped setting.
func TestNeedsApply(t *testing.T) {
	m := minimalMirror()
	desired := desiredStatefulSet(m, testImages, "h1")
	live := &appsv1.StatefulSet{}
	require.NoError(t, roundTrip(desired, live))
	// What the API server adds: defaults, status, metadata.
	live.ResourceVersion, live.Generation = "42", 3
	live.Spec.PodManagementPolicy = appsv1.OrderedReadyPodManagement
	live.Spec.Template.Spec.Containers[0].TerminationMessagePath = "/dev/termination-log"
	live.Spec.Template.Spec.Containers[0].ReadinessProbe.TimeoutSeconds = 1
	live.Spec.Template.Spec.Volumes[1].ConfigMap.DefaultMode = ptr.To[int32](0o644)
	live.Spec.Template.Spec.DNSPolicy = corev1.DNSClusterFirst
	live.Status.ReadyReplicas = 1
	live.Annotations["someone-else"] = "x"
	assert.False(t, needsApply(desired, live), "defaults and others' fields are no reason to apply")

	drifted := live.DeepCopy()
	drifted.Spec.Template.Spec.Containers[0].Image = "evil/registry"
	assert.True(t, needsApply(desired, drifted), "drift of an owned field")

	removed := live.DeepCopy()
	removed.Spec.Template.Spec.Volumes = removed.Spec.Template.Spec.Volumes[:2]
	assert.True(t, needsApply(desired, removed), "a volume removed by someone")

	// The spec no longer asks for credentials: the desired object has fewer volumes but
	// is still a subset of live, so only the applied-hash annotation tells.
	withCreds := minimalMirror()
	withCreds.Spec.CredentialsSecretRef = fullMirror().Spec.CredentialsSecretRef
	liveWithCreds := &appsv1.StatefulSet{}
	require.NoError(t, roundTrip(desiredStatefulSet(withCreds, testImages, "h1"), liveWithCreds))
	assert.True(t, needsApply(desired, liveWithCreds))
	assert.False(t, needsApply(desiredStatefulSet(withCreds, testImages, "h1"), liveWithCreds))

	// Quantities compare in canonical form.
	pvcLive := &corev1.PersistentVolumeClaim{}
	require.NoError(t, roundTrip(desiredPVC(m), pvcLive))
	pvcLive.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("10240Mi")
	assert.False(t, needsApply(desiredPVC(m), pvcLive), "10240Mi is 10Gi in canonical form")
	m.Spec.Storage = resource.MustParse("20Gi")
	pvcGrown := &corev1.PersistentVolumeClaim{}
	require.NoError(t, roundTrip(desiredPVC(minimalMirror()), pvcGrown))
	assert.True(t, needsApply(desiredPVC(m), pvcGrown), "storage grew")
}
