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

	mirrorsv1alpha1 "github.com/quartet-operator/quartet/api/mirrors/v1alpha1"
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
	desired := desiredStatefulSet(m, testImages, "h1", 0)
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
	require.NoError(t, roundTrip(desiredStatefulSet(withCreds, testImages, "h1", 0), liveWithCreds))
	assert.True(t, needsApply(desired, liveWithCreds))
	assert.False(t, needsApply(desiredStatefulSet(withCreds, testImages, "h1", 0), liveWithCreds))

	// Quantities compare in canonical form.
	pvcLive := &corev1.PersistentVolumeClaim{}
	require.NoError(t, roundTrip(desiredPVC(m, 0), pvcLive))
	pvcLive.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("10240Mi")
	assert.False(t, needsApply(desiredPVC(m, 0), pvcLive), "10240Mi is 10Gi in canonical form")
	m.Spec.Storage = resource.MustParse("20Gi")
	pvcGrown := &corev1.PersistentVolumeClaim{}
	require.NoError(t, roundTrip(desiredPVC(minimalMirror(), 0), pvcGrown))
	assert.True(t, needsApply(desiredPVC(m, 0), pvcGrown), "storage grew")
}

func TestDecideChild(t *testing.T) {
	m := minimalMirror()
	ours := func() child {
		c := child{kind: "PersistentVolumeClaim", name: pvcName(m), desired: desiredPVC(m, 0), live: &corev1.PersistentVolumeClaim{}}
		require.NoError(t, roundTrip(c.desired, c.live))
		return c
	}
	assert.Equal(t, childCreate, decideChild(m, child{desired: desiredPVC(m, 0), live: &corev1.PersistentVolumeClaim{}}, false), "absent")

	assert.Equal(t, childUpToDate, decideChild(m, ours(), true), "as applied")

	grown := minimalMirror()
	grown.Spec.Storage = resource.MustParse("20Gi")
	c := ours()
	c.desired = desiredPVC(grown, 0)
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
	addr, ok := registryAddress(1, svc)
	assert.True(t, ok)
	assert.Equal(t, "10.0.0.7:5000", addr)
	for name, tc := range map[string]struct {
		ready int32
		svc   *corev1.Service
	}{
		"no ready replica":  {0, svc},
		"no Service":        {1, nil},
		"no cluster IP yet": {1, &corev1.Service{}},
	} {
		_, ok := registryAddress(tc.ready, tc.svc)
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

// TestDecideStatusWrite follows a mirror from its first pass to Ready: what automation
// acts on is written at once, rollout progress after progressHold.
func TestDecideStatusWrite(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	m := minimalMirror()
	pending := boundPVC()
	pending.Status.Phase = corev1.ClaimPending
	rolling := readySTS()
	rolling.Status.ReadyReplicas = 0
	agentsRolling := readyDS()
	agentsRolling.Status.NumberReady = 1
	ok := outcome{access: granted, workloads: workloads{registries: one(readySTS(), boundPVC()), daemonSet: readyDS()}, hostPort: 35000, complete: true}
	statusOf := func(o outcome, prev mirrorsv1alpha1.RegistryMirrorStatus) mirrorsv1alpha1.RegistryMirrorStatus {
		mm := m.DeepCopy()
		mm.Status = prev
		return computeStatus(mm, o, t0)
	}
	with := func(edit func(*outcome)) outcome {
		o := ok
		edit(&o)
		return o
	}
	first := statusOf(with(func(o *outcome) { o.workloads.registries = one(readySTS(), pending) }), mirrorsv1alpha1.RegistryMirrorStatus{})
	notReady := statusOf(with(func(o *outcome) { o.workloads.registries = one(rolling, boundPVC()) }), first)
	agents := statusOf(with(func(o *outcome) { o.workloads.daemonSet = agentsRolling }), first)
	ready := statusOf(ok, notReady)
	moreNodes := func() mirrorsv1alpha1.RegistryMirrorStatus {
		ds := readyDS()
		ds.Status.DesiredNumberScheduled, ds.Status.NumberReady, ds.Status.UpdatedNumberScheduled = 4, 4, 4
		return statusOf(with(func(o *outcome) { o.workloads.daemonSet = ds }), ready)
	}()
	degraded := statusOf(with(func(o *outcome) {
		o.workloads.registries = one(rolling, boundPVC())
		o.problems = []problem{{mirrorsv1alpha1.ReasonObjectConflict, "Service mirrors/x is not controlled by this RegistryMirror"}}
	}), notReady)
	nextGen := func() mirrorsv1alpha1.RegistryMirrorStatus {
		mm := m.DeepCopy()
		mm.Generation = 2
		mm.Status = notReady
		return computeStatus(mm, with(func(o *outcome) { o.workloads.registries = one(rolling, boundPVC()) }), t0)
	}()
	noPort := statusOf(with(func(o *outcome) { o.workloads.registries, o.hostPort = one(rolling, boundPVC()), 0 }), notReady)

	soon := 300 * time.Millisecond
	for _, tc := range []struct {
		name         string
		stored, next mirrorsv1alpha1.RegistryMirrorStatus
		heldFor      time.Duration
		wantWrite    bool
		wantAfter    time.Duration
		progressOnly bool
	}{
		{"nothing changed", notReady, notReady, 0, false, 0, true},
		{"the first status is written at once", mirrorsv1alpha1.RegistryMirrorStatus{}, first, 0, true, 0, false},
		{"progress is held back", first, notReady, 0, false, progressHold, true},
		{"progress held back for a while waits out the rest", first, notReady, soon, false, progressHold - soon, true},
		{"progress of the node agents is held back", notReady, agents, 0, false, progressHold, true},
		{"progress held back long enough is written", first, notReady, progressHold, true, 0, true},
		{"Ready is written at once", notReady, ready, soon, true, 0, false},
		{"node count of a Ready mirror is progress", ready, moreNodes, 0, false, progressHold, true},
		{"a problem is written at once", notReady, degraded, 0, true, 0, false},
		{"a new generation is written at once", notReady, nextGen, 0, true, 0, false},
		{"an endpoint change is written at once", notReady, noPort, 0, true, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			write, after := decideStatusWrite(tc.stored, tc.next, tc.heldFor)
			assert.Equal(t, tc.wantWrite, write)
			assert.Equal(t, tc.wantAfter, after)
			assert.Equal(t, tc.progressOnly, progressOnly(tc.stored, tc.next))
		})
	}
}

func TestNextPass(t *testing.T) {
	conflict := []problem{{mirrorsv1alpha1.ReasonObjectConflict, "Service x exists"}}
	other := []problem{{mirrorsv1alpha1.ReasonApplyFailed, "refused"}}
	assert.Equal(t, probeSteady, nextPass(probeSteady, nil, false))
	assert.Equal(t, time.Duration(0), nextPass(0, other, false), "probes off and nothing to look at again")
	assert.Equal(t, conflictRecheck, nextPass(0, conflict, false), "a foreign object is looked at again although nothing watches it")
	assert.Equal(t, probeSteady, nextPass(probeSteady, conflict, false), "the probes come sooner")
	assert.Equal(t, pinsRefresh, nextPass(0, nil, true), "with node access, the pods' images are looked at again though probes are off")
	assert.Equal(t, probeSteady, nextPass(probeSteady, nil, true), "the probes come sooner")
	assert.Equal(t, pinsRefresh, nextPass(5*time.Minute, nil, true))
}
