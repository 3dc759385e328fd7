package registrymirror

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
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

func TestDecideChild(t *testing.T) {
	m := minimalMirror()
	ours := func() child {
		c := child{kind: "PersistentVolumeClaim", name: pvcName(m), desired: desiredPVC(m), live: &corev1.PersistentVolumeClaim{}}
		require.NoError(t, roundTrip(c.desired, c.live))
		return c
	}
	assert.Equal(t, childCreate, decideChild(m, child{desired: desiredPVC(m), live: &corev1.PersistentVolumeClaim{}}, false), "absent")

	assert.Equal(t, childUpToDate, decideChild(m, ours(), true), "as applied")

	grown := minimalMirror()
	grown.Spec.Storage = resource.MustParse("20Gi")
	c := ours()
	c.desired = desiredPVC(grown)
	assert.Equal(t, childUpdate, decideChild(m, c, true), "the spec asks for more")

	foreign := ours()
	foreign.live.SetOwnerReferences(nil)
	assert.Equal(t, childForeign, decideChild(m, foreign, true), "nobody's")
	other := ours()
	other.live.GetOwnerReferences()[0].UID = "someone-else"
	assert.Equal(t, childForeign, decideChild(m, other, true), "another owner's")
}

func TestClassifyApplyError(t *testing.T) {
	gr := schema.GroupResource{Resource: "persistentvolumeclaims"}
	terminating := apierrors.NewForbidden(gr, "x", errors.New("namespace is being terminated"))
	terminating.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: corev1.NamespaceTerminatingCause}}
	for _, tc := range []struct {
		name string
		err  error
		want applyFailure
	}{
		{"namespace terminating (a Forbidden with its cause)", terminating, applyNamespaceTerminating},
		{"invalid", apierrors.NewInvalid(schema.GroupKind{Kind: "PersistentVolumeClaim"}, "x", nil), applyRefused},
		{"forbidden", apierrors.NewForbidden(gr, "x", errors.New("exceeded quota")), applyRefused},
		{"conflict", apierrors.NewConflict(gr, "x", errors.New("changed")), applyFailed},
		{"unavailable", apierrors.NewServiceUnavailable("later"), applyFailed},
		{"network", errors.New("connection reset"), applyFailed},
	} {
		assert.Equal(t, tc.want, classifyApplyError(tc.err), tc.name)
	}
}

func TestRegistryAddressAndNextProbe(t *testing.T) {
	svc := &corev1.Service{Spec: corev1.ServiceSpec{ClusterIP: "10.0.0.7"}}
	addr, ok := registryAddress(readySTS(), svc)
	assert.True(t, ok)
	assert.Equal(t, "10.0.0.7:5000", addr)
	notReady := readySTS()
	notReady.Status.ReadyReplicas = 0
	for name, tc := range map[string]struct {
		sts *appsv1.StatefulSet
		svc *corev1.Service
	}{
		"no StatefulSet":    {nil, svc},
		"no ready replica":  {notReady, svc},
		"no Service":        {readySTS(), nil},
		"no cluster IP yet": {readySTS(), &corev1.Service{}},
	} {
		_, ok := registryAddress(tc.sts, tc.svc)
		assert.False(t, ok, name)
	}

	assert.Equal(t, time.Duration(0), nextProbe(probeResults{off: true}), "probing off: no timer")
	assert.Equal(t, probeSteady, nextProbe(probeResults{upstreamProbed: true}), "registry not probed yet")
	assert.Equal(t, probeSteady, nextProbe(probedOK().probes))
	refused := probedOK().probes
	refused.registryErr = errors.New("connection refused")
	assert.Equal(t, probeSoon, nextProbe(refused), "the registry does not answer yet")
	down := probedOK().probes
	down.upstreamErr = errors.New("connection refused")
	assert.Equal(t, probeSteady, nextProbe(down), "an upstream that is down is not asked more often")
}
