package registrymirror

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"net/url"
	"os"
	"reflect"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mirrorsv1alpha1 "github.com/quartet-operator/quartet/api/mirrors/v1alpha1"
	"github.com/quartet-operator/quartet/internal/egress"
)

// one is the registries of a mirror of one replica.
func one(sts *appsv1.StatefulSet, pvc *corev1.PersistentVolumeClaim) []registryReplica {
	return []registryReplica{{statefulSet: sts, pvc: pvc}}
}

func readySTS() *appsv1.StatefulSet {
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "docker-hub-registry", Generation: 2},
		Spec:       appsv1.StatefulSetSpec{Replicas: ptr.To[int32](1)},
		Status: appsv1.StatefulSetStatus{ObservedGeneration: 2, Replicas: 1, ReadyReplicas: 1, UpdatedReplicas: 1,
			CurrentRevision: "r2", UpdateRevision: "r2"},
	}
}

func readyDS() *appsv1.DaemonSet {
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "docker-hub-node", Generation: 1},
		Status: appsv1.DaemonSetStatus{ObservedGeneration: 1, DesiredNumberScheduled: 3, CurrentNumberScheduled: 3,
			UpdatedNumberScheduled: 3, NumberReady: 3, NumberAvailable: 3},
	}
}

// granted is the node access of a mirror a RegistryHostGrant names.
var granted = nodeAccess{Granted: true, Capabilities: []string{"pull"}, Reason: mirrorsv1alpha1.ReasonGranted, Message: "granted"}

func boundPVC() *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "docker-hub-registry-cache"},
		Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}}
}

func TestReadyCondition(t *testing.T) {
	for _, tc := range []struct {
		name        string
		obs         func() outcome
		wantStatus  metav1.ConditionStatus
		wantReason  string
		wantMessage string
	}{
		{"all ready", func() outcome {
			return outcome{access: granted, workloads: workloads{registries: one(readySTS(), boundPVC()), daemonSet: readyDS()}, complete: true}
		}, metav1.ConditionTrue, mirrorsv1alpha1.ReasonMirrorReady, "The registry serves and node agents are ready on 3 nodes"},
		{"no nodes yet is still ready", func() outcome {
			return outcome{access: granted, workloads: workloads{registries: one(readySTS(), boundPVC()), daemonSet: &appsv1.DaemonSet{}}, complete: true}
		}, metav1.ConditionTrue, mirrorsv1alpha1.ReasonMirrorReady, "The registry serves and node agents are ready on 0 nodes"},
		{"nothing applied yet", func() outcome { return outcome{access: granted} },
			metav1.ConditionUnknown, mirrorsv1alpha1.ReasonRegistryMissing, "The registry StatefulSet does not exist; the node agent DaemonSet does not exist"},
		{"registry missing after a complete pass (conflict)", func() outcome {
			return outcome{access: granted, workloads: workloads{registries: one(nil, nil), daemonSet: readyDS()}, complete: true}
		}, metav1.ConditionFalse, mirrorsv1alpha1.ReasonRegistryMissing, "The registry StatefulSet does not exist"},
		{"cache volume pending", func() outcome {
			pvc := boundPVC()
			pvc.Status.Phase = ""
			return outcome{access: granted, workloads: workloads{registries: one(readySTS(), pvc), daemonSet: readyDS()}, complete: true}
		}, metav1.ConditionFalse, mirrorsv1alpha1.ReasonCacheVolumePending, "Cache volume docker-hub-registry-cache is Pending (no matching PersistentVolume or provisioner yet)"},
		{"new StatefulSet not observed yet", func() outcome {
			sts := readySTS()
			sts.Generation = 3
			return outcome{access: granted, workloads: workloads{registries: one(sts, boundPVC()), daemonSet: readyDS()}, complete: true}
		}, metav1.ConditionFalse, mirrorsv1alpha1.ReasonRegistryRollingOut, "Registry docker-hub-registry is rolling out (1/1 updated)"},
		{"registry revision rolling", func() outcome {
			sts := readySTS()
			sts.Status.UpdateRevision = "r3"
			sts.Status.UpdatedReplicas = 0
			return outcome{access: granted, workloads: workloads{registries: one(sts, boundPVC()), daemonSet: readyDS()}, complete: true}
		}, metav1.ConditionFalse, mirrorsv1alpha1.ReasonRegistryRollingOut, "Registry docker-hub-registry is rolling out (0/1 updated)"},
		{"registry not ready", func() outcome {
			sts := readySTS()
			sts.Status.ReadyReplicas = 0
			return outcome{access: granted, workloads: workloads{registries: one(sts, boundPVC()), daemonSet: readyDS()}, complete: true}
		}, metav1.ConditionFalse, mirrorsv1alpha1.ReasonRegistryNotReady, "Registry docker-hub-registry has 0/1 ready replicas"},
		{"node agents rolling", func() outcome {
			ds := readyDS()
			ds.Status.UpdatedNumberScheduled = 1
			return outcome{access: granted, workloads: workloads{registries: one(readySTS(), boundPVC()), daemonSet: ds}, complete: true}
		}, metav1.ConditionFalse, mirrorsv1alpha1.ReasonNodeAgentsRollingOut, "Node agents are rolling out (1/3 nodes updated)"},
		{"node agents not ready, registry not ready either", func() outcome {
			sts := readySTS()
			sts.Status.ReadyReplicas = 0
			ds := readyDS()
			ds.Status.NumberReady = 2
			return outcome{access: granted, workloads: workloads{registries: one(sts, boundPVC()), daemonSet: ds}, complete: true}
		}, metav1.ConditionFalse, mirrorsv1alpha1.ReasonRegistryNotReady, "Registry docker-hub-registry has 0/1 ready replicas; node agents are ready on 2/3 nodes"},
		{"probed: registry answers, upstream answers", func() outcome {
			return probedOK()
		}, metav1.ConditionTrue, mirrorsv1alpha1.ReasonMirrorReady, "The registry answers through its Service and node agents are ready on 3 nodes"},
		{"probed: registry does not answer through its Service", func() outcome {
			o := probedOK()
			o.probes.registryErr = dialError("10.0.0.7:5000", syscall.ECONNREFUSED)
			return o
		}, metav1.ConditionFalse, mirrorsv1alpha1.ReasonRegistryNotAnswering, "The registry does not answer GET /v2/ through its Service (10.0.0.7:5000): connection refused"},
		{"probed: registry answers with an error", func() outcome {
			o := probedOK()
			o.probes.registryErr = egress.StatusError{Code: 503}
			return o
		}, metav1.ConditionFalse, mirrorsv1alpha1.ReasonRegistryNotAnswering, "The registry does not answer GET /v2/ through its Service (10.0.0.7:5000): answered with an HTTP error status"},
		{"probed: the upstream's address is refused", func() outcome {
			o := probedOK()
			o.probes.upstreamErr = dialError("169.254.169.254:80", egress.AddressRefusedError{Addr: netip.MustParseAddr("169.254.169.254")})
			return o
		}, metav1.ConditionFalse, mirrorsv1alpha1.ReasonUpstreamAddressRefused, "The upstream's address is not allowed for probes: it is not known to answer"},
		{"no node access: an in-cluster cache, ready without node agents", func() outcome {
			return outcome{access: nodeAccess{Reason: mirrorsv1alpha1.ReasonNoHostGrant}, workloads: workloads{registries: one(readySTS(), boundPVC())}, complete: true}
		}, metav1.ConditionTrue, mirrorsv1alpha1.ReasonMirrorReady, "The registry serves in the cluster only (no node access)"},
		{"no node access although configureNodes asks for the nodes", func() outcome {
			return outcome{access: nodeAccess{Reason: mirrorsv1alpha1.ReasonNoHostGrant}, wantsNodes: true,
				workloads: workloads{registries: one(readySTS(), boundPVC())}, complete: true}
		}, metav1.ConditionFalse, mirrorsv1alpha1.ReasonNodeAccessNotGranted, "No node access: spec.configureNodes asks for the nodes and no RegistryHostGrant allows this mirror there (see the NodeAccess condition)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.obs()
			c := readyCondition(o, upstreamCondition(minimalMirror(), o.probes))
			assert.Equal(t, mirrorsv1alpha1.ConditionReady, c.Type)
			assert.Equal(t, tc.wantStatus, c.Status)
			assert.Equal(t, tc.wantReason, c.Reason)
			assert.Equal(t, tc.wantMessage, c.Message)
		})
	}
}

// dialError is the error a probe gets when connecting to addr fails with err.
func dialError(addr string, err error) error {
	if errno, ok := err.(syscall.Errno); ok {
		err = os.NewSyscallError("connect", errno)
	}
	return &url.Error{Op: "Get", URL: "http://" + addr + "/v2/", Err: &net.OpError{Op: "dial", Net: "tcp", Addr: net.TCPAddrFromAddrPort(netip.MustParseAddrPort(addr)), Err: err}}
}

func probedOK() outcome {
	return outcome{access: granted, workloads: workloads{registries: one(readySTS(), boundPVC()), daemonSet: readyDS()}, complete: true,
		probes: probeResults{registryProbed: true, registryAddr: "10.0.0.7:5000", upstreamProbed: true}}
}

// TestUpstreamReachability follows one mirror's upstream: never answered (not Ready, the
// cache holds nothing), answering (Ready), gone (still Ready: the cache serves), back.
func TestUpstreamReachability(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	m := minimalMirror()
	down := probedOK()
	down.probes.upstreamErr = dialError("10.213.0.2:5002", syscall.ECONNREFUSED)
	require.ErrorContains(t, down.probes.upstreamErr, "dial tcp 10.213.0.2:5002: connect: connection refused")
	steps := []struct {
		name                   string
		obs                    outcome
		wantUp                 metav1.ConditionStatus
		wantUpReason           string
		wantReady              metav1.ConditionStatus
		wantReadyReason        string
		wantReadyMessageSuffix string
	}{
		{"never answered", down, metav1.ConditionFalse, mirrorsv1alpha1.ReasonNeverReached, metav1.ConditionFalse, mirrorsv1alpha1.ReasonUpstreamNeverReached, "nothing can be pulled through the mirror yet"},
		{"answers", probedOK(), metav1.ConditionTrue, mirrorsv1alpha1.ReasonReachable, metav1.ConditionTrue, mirrorsv1alpha1.ReasonMirrorReady, "ready on 3 nodes"},
		{"gone", down, metav1.ConditionFalse, mirrorsv1alpha1.ReasonUnreachable, metav1.ConditionTrue, mirrorsv1alpha1.ReasonMirrorReady, "the upstream is unreachable, so only cached content is served"},
		{"still gone", down, metav1.ConditionFalse, mirrorsv1alpha1.ReasonUnreachable, metav1.ConditionTrue, mirrorsv1alpha1.ReasonMirrorReady, "only cached content is served"},
		{"back", probedOK(), metav1.ConditionTrue, mirrorsv1alpha1.ReasonReachable, metav1.ConditionTrue, mirrorsv1alpha1.ReasonMirrorReady, "ready on 3 nodes"},
	}
	for _, s := range steps {
		m.Status = computeStatus(m, s.obs, t0)
		up := meta.FindStatusCondition(m.Status.Conditions, mirrorsv1alpha1.ConditionUpstreamReachable)
		ready := meta.FindStatusCondition(m.Status.Conditions, mirrorsv1alpha1.ConditionReady)
		assert.Equal(t, s.wantUp, up.Status, s.name)
		assert.Equal(t, s.wantUpReason, up.Reason, s.name)
		assert.Equal(t, s.wantReady, ready.Status, s.name)
		assert.Equal(t, s.wantReadyReason, ready.Reason, s.name)
		assert.True(t, strings.HasSuffix(ready.Message, s.wantReadyMessageSuffix), "%s: %q", s.name, ready.Message)
	}
	msg := meta.FindStatusCondition(computeStatus(m, down, t0).Conditions, mirrorsv1alpha1.ConditionUpstreamReachable).Message
	assert.Equal(t, "https://registry-1.docker.io does not answer (connection refused); the mirror serves what its cache holds", msg)
	assert.NotContains(t, msg, "dial tcp", "the status says what failed, not the error's text")

	// An upstream whose address probes may not dial: a rule, not a failure of the
	// network, so it has a reason of its own; the mirror is not Ready, as its upstream is
	// not known to answer.
	refused := probedOK()
	refused.probes.upstreamErr = dialError("169.254.169.254:80", egress.AddressRefusedError{Addr: netip.MustParseAddr("169.254.169.254")})
	for _, prev := range []string{"never probed", "reached before"} {
		rm := minimalMirror()
		if prev == "reached before" {
			rm.Status = computeStatus(rm, probedOK(), t0)
		}
		st := computeStatus(rm, refused, t0)
		up := meta.FindStatusCondition(st.Conditions, mirrorsv1alpha1.ConditionUpstreamReachable)
		assert.Equal(t, metav1.ConditionFalse, up.Status, prev)
		assert.Equal(t, mirrorsv1alpha1.ReasonAddressRefused, up.Reason, prev)
		assert.Equal(t, "https://registry-1.docker.io is not probed: address not allowed for probes (loopback, link-local or metadata); "+
			"a cluster admin can allow its range with --registrymirror-probe-allowed-cidrs", up.Message, prev)
		assert.NotContains(t, up.Message, "169.254.169.254", prev)
		ready := meta.FindStatusCondition(st.Conditions, mirrorsv1alpha1.ConditionReady)
		assert.Equal(t, metav1.ConditionFalse, ready.Status, prev)
		assert.Equal(t, mirrorsv1alpha1.ReasonUpstreamAddressRefused, ready.Reason, prev)
	}

	off := outcome{access: granted, workloads: workloads{registries: one(readySTS(), boundPVC()), daemonSet: readyDS()}, complete: true, probes: probeResults{off: true}}
	st := computeStatus(minimalMirror(), off, t0)
	assert.Equal(t, metav1.ConditionUnknown, meta.FindStatusCondition(st.Conditions, mirrorsv1alpha1.ConditionUpstreamReachable).Status)
	assert.Equal(t, metav1.ConditionTrue, meta.FindStatusCondition(st.Conditions, mirrorsv1alpha1.ConditionReady).Status, "probes off: Ready rests on the workloads")
}

func TestComputeStatus(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Minute))
	m := minimalMirror()
	m.Generation = 4

	ok := outcome{access: granted, workloads: workloads{registries: one(readySTS(), boundPVC()), daemonSet: readyDS()}, hostPort: 35002, complete: true}
	st := computeStatus(m, ok, t0)
	assert.Equal(t, "http://docker-hub-registry.mirrors.svc:5000", st.Endpoint)
	assert.Equal(t, "http://127.0.0.1:35002", st.NodeEndpoint)
	assert.Equal(t, int32(1), st.ReadyReplicas)
	assert.Equal(t, int32(3), st.NodesReady)
	assert.Equal(t, int32(3), st.NodesDesired)
	require.Len(t, st.Conditions, 4, "Ready, Degraded, UpstreamReachable and NodeAccess are set on every pass")
	assert.Equal(t, metav1.ConditionTrue, meta.FindStatusCondition(st.Conditions, mirrorsv1alpha1.ConditionNodeAccess).Status)
	assert.Equal(t, metav1.ConditionUnknown, meta.FindStatusCondition(st.Conditions, mirrorsv1alpha1.ConditionUpstreamReachable).Status)
	ready := meta.FindStatusCondition(st.Conditions, mirrorsv1alpha1.ConditionReady)
	assert.Equal(t, metav1.ConditionTrue, ready.Status)
	assert.Equal(t, int64(4), ready.ObservedGeneration)
	assert.Equal(t, t0, ready.LastTransitionTime)
	degraded := meta.FindStatusCondition(st.Conditions, mirrorsv1alpha1.ConditionDegraded)
	assert.Equal(t, metav1.ConditionFalse, degraded.Status)
	assert.Equal(t, mirrorsv1alpha1.ReasonAsExpected, degraded.Reason)

	// The same observation later changes nothing, so the caller skips the write.
	m.Status = st
	assert.Equal(t, st, computeStatus(m, ok, t1))

	// A conflict and a refused apply: Degraded with every problem listed, transition time
	// moves. (Neither is an error of the pass, so the generation is observed:
	// TestFinishObservesTheGenerationActedOn.)
	bad := ok
	bad.problems = []problem{{mirrorsv1alpha1.ReasonObjectConflict, "Service mirrors/docker-hub-registry exists and is not controlled by this RegistryMirror"}, {mirrorsv1alpha1.ReasonApplyFailed, "applying X was refused"}}
	m.Generation = 5
	st2 := computeStatus(m, bad, t1)
	degraded = meta.FindStatusCondition(st2.Conditions, mirrorsv1alpha1.ConditionDegraded)
	assert.Equal(t, metav1.ConditionTrue, degraded.Status)
	assert.Equal(t, mirrorsv1alpha1.ReasonObjectConflict, degraded.Reason)
	assert.Equal(t, "Service mirrors/docker-hub-registry exists and is not controlled by this RegistryMirror; applying X was refused", degraded.Message)
	assert.Equal(t, t1, degraded.LastTransitionTime)
	assert.Equal(t, t0, meta.FindStatusCondition(st2.Conditions, mirrorsv1alpha1.ConditionReady).LastTransitionTime, "Ready did not change")

	// No host port: no node endpoint.
	noPort := ok
	noPort.hostPort = 0
	assert.Empty(t, computeStatus(m, noPort, t1).NodeEndpoint)
}

// TestFinishObservesTheGenerationActedOn: observedGeneration (set by the status writer, not
// by computeStatus) advances to the generation the pass read when the pass returned no
// error, a conflict and a refused apply included (the user's to resolve); a pass that failed
// (an API error, retried) does not claim the generation, while its conditions carry it.
func TestFinishObservesTheGenerationActedOn(t *testing.T) {
	env.Require(t)
	ctx := context.Background()
	m := newMirror(newNamespace(t), "docker-hub", "https://registry-1.docker.io", "")
	require.NoError(t, env.Client.Create(ctx, m))
	r := &Reconciler{Client: env.Client, Recorder: events.NewFakeRecorder(100), Clock: clock.RealClock{},
		writer: newStatusWriter(env.Client, env.Client)}
	ok := outcome{access: granted, workloads: workloads{registries: one(readySTS(), boundPVC()), daemonSet: readyDS()}, hostPort: 35002, complete: true}
	_, err := r.finish(ctx, m, ok, true)
	require.NoError(t, err)
	assert.Equal(t, int64(1), getMirror(t, client.ObjectKeyFromObject(m)).Status.ObservedGeneration)

	editSpec(t, client.ObjectKeyFromObject(m), func(m *mirrorsv1alpha1.RegistryMirror) { m.Spec.ConfigureNodes = true })
	m = getMirror(t, client.ObjectKeyFromObject(m))
	require.Equal(t, int64(2), m.Generation)
	bad := ok
	bad.problems = []problem{{mirrorsv1alpha1.ReasonObjectConflict, "Service x exists and is not controlled by this RegistryMirror"}, {mirrorsv1alpha1.ReasonApplyFailed, "applying X was refused"}}
	failedPass := bad
	failedPass.complete = false
	_, err = r.finish(ctx, m, failedPass, false)
	require.NoError(t, err)
	got := getMirror(t, client.ObjectKeyFromObject(m))
	assert.Equal(t, int64(1), got.Status.ObservedGeneration, "a failed pass does not claim the generation")
	assert.Equal(t, int64(2), meta.FindStatusCondition(got.Status.Conditions, mirrorsv1alpha1.ConditionDegraded).ObservedGeneration)

	_, err = r.finish(ctx, m, bad, true)
	require.NoError(t, err)
	assert.Equal(t, int64(2), getMirror(t, client.ObjectKeyFromObject(m)).Status.ObservedGeneration, "observed: the problems are the user's")
}

// TestComputeStatusReportsTheCache: the images in use and cached, and the cache volume's
// fill, from the pass's count and the registry's report.
func TestComputeStatusReportsTheCache(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	m := minimalMirror()
	warmed := &CacheReport{Pinned: 3, Cached: 2, LastPass: t0, DiskUsedBytes: 5<<30 - 1, DiskCapacityBytes: 10 << 30}
	for _, tc := range []struct {
		name                 string
		access               nodeAccess
		inUse                *int32
		report               *CacheReport
		stored               *int32
		wantInUse, wantCache *int32
		wantPercent          *int32
		wantCapacity         string
	}{
		{"granted, reported", granted, ptr.To[int32](3), warmed, nil, ptr.To[int32](3), ptr.To[int32](2), ptr.To[int32](49), "10Gi"},
		{"granted, the registry has not warmed yet", granted, ptr.To[int32](3), &CacheReport{DiskCapacityBytes: 10 << 30}, nil,
			ptr.To[int32](3), nil, ptr.To[int32](0), "10Gi"},
		{"granted, no answer this pass: the last count stays", granted, ptr.To[int32](3), nil, ptr.To[int32](1), ptr.To[int32](3), ptr.To[int32](1), nil, ""},
		{"no node access: no image counts, the disk still", nodeAccess{Reason: mirrorsv1alpha1.ReasonNoHostGrant}, nil, warmed, ptr.To[int32](1),
			nil, nil, ptr.To[int32](49), "10Gi"},
		{"no disk measured yet", granted, ptr.To[int32](3), &CacheReport{Pinned: 3, Cached: 3, LastPass: t0}, nil, ptr.To[int32](3), ptr.To[int32](3), nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := m.DeepCopy()
			m.Status.ImagesCached = tc.stored
			st := computeStatus(m, outcome{access: tc.access, imagesInUse: tc.inUse, probes: probeResults{cache: tc.report}}, t0)
			assert.Equal(t, tc.wantInUse, st.ImagesInUse)
			assert.Equal(t, tc.wantCache, st.ImagesCached)
			assert.Equal(t, tc.wantPercent, st.CacheUsedPercent)
			if tc.wantCapacity == "" {
				assert.Nil(t, st.CacheCapacity)
			} else {
				require.NotNil(t, st.CacheCapacity)
				assert.Equal(t, tc.wantCapacity, st.CacheCapacity.String())
			}
		})
	}
	assert.Equal(t, int32(100), usedPercent(12, 10), "never above 100")
	assert.Equal(t, int32(0), usedPercent(5, 0))
}

// TestComputeStatusReportsTheHitRatio: the share of blob pulls served from the cache, from
// the registry's report; unset before the first pull, kept when a pass has no report.
func TestComputeStatusReportsTheHitRatio(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	for _, tc := range []struct {
		name   string
		report *CacheReport
		stored *int32
		want   *int32
	}{
		{"no pull yet", &CacheReport{}, nil, nil},
		{"misses only", &CacheReport{BlobMisses: 4}, nil, ptr.To[int32](0)},
		{"2 of 3 from the cache", &CacheReport{BlobHits: 2, BlobMisses: 1}, nil, ptr.To[int32](66)},
		{"hits only", &CacheReport{BlobHits: 7}, nil, ptr.To[int32](100)},
		{"no answer this pass: the last value stays", nil, ptr.To[int32](80), ptr.To[int32](80)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := minimalMirror()
			m.Status.CacheHitPercent = tc.stored
			st := computeStatus(m, outcome{access: granted, probes: probeResults{cache: tc.report}}, t0)
			assert.Equal(t, tc.want, st.CacheHitPercent)
		})
	}
}

// TestReadyChecks holds each of Ready's checks to what it looks at, on its own.
func TestReadyChecks(t *testing.T) {
	pending := boundPVC()
	pending.Status.Phase = corev1.ClaimPending
	notReady := readySTS()
	notReady.Status.ReadyReplicas = 0
	agentsNotReady := readyDS()
	agentsNotReady.Status.NumberReady = 0
	reasons := func(ps []problem) []string {
		var out []string
		for _, p := range ps {
			out = append(out, p.Reason)
		}
		return out
	}
	reached := metav1.Condition{Reason: mirrorsv1alpha1.ReasonReachable}
	for _, tc := range []struct {
		name     string
		check    readyCheck
		o        outcome
		upstream metav1.Condition
		want     []string
	}{
		{"registry: one replica ready", registryServes, outcome{workloads: workloads{registries: one(readySTS(), boundPVC())}}, reached, nil},
		{"registry: none", registryServes, outcome{}, reached, []string{mirrorsv1alpha1.ReasonRegistryMissing}},
		{"registry: volume pending", registryServes, outcome{workloads: workloads{registries: one(readySTS(), pending)}}, reached, []string{mirrorsv1alpha1.ReasonCacheVolumePending}},
		{"registry: one of two serves", registryServes, outcome{workloads: workloads{registries: []registryReplica{{notReady, boundPVC()}, {readySTS(), boundPVC()}}}}, reached, nil},
		{"registry: neither of two", registryServes, outcome{workloads: workloads{registries: []registryReplica{{notReady, boundPVC()}, {nil, nil}}}}, reached,
			[]string{mirrorsv1alpha1.ReasonRegistryNotReady, mirrorsv1alpha1.ReasonRegistryMissing}},
		{"agents: ready", nodeAgentsReady, outcome{access: granted, workloads: workloads{daemonSet: readyDS()}}, reached, nil},
		{"agents: not ready", nodeAgentsReady, outcome{access: granted, workloads: workloads{daemonSet: agentsNotReady}}, reached, []string{mirrorsv1alpha1.ReasonNodeAgentsNotReady}},
		{"agents: missing", nodeAgentsReady, outcome{access: granted}, reached, []string{mirrorsv1alpha1.ReasonNodeAgentMissing}},
		{"agents: an in-cluster cache has none", nodeAgentsReady, outcome{}, reached, nil},
		{"agents: nodes asked for, no grant", nodeAgentsReady, outcome{wantsNodes: true}, reached, []string{mirrorsv1alpha1.ReasonNodeAccessNotGranted}},
		{"registry probe: not asked", registryAnswers, outcome{}, reached, nil},
		{"registry probe: answered", registryAnswers, outcome{probes: probeResults{registryProbed: true}}, reached, nil},
		{"registry probe: silent", registryAnswers, outcome{probes: probeResults{registryProbed: true, registryErr: errors.New("timeout")}}, reached,
			[]string{mirrorsv1alpha1.ReasonRegistryNotAnswering}},
		{"upstream: reachable", upstreamAnswered, outcome{}, reached, nil},
		{"upstream: unreachable now, answered before", upstreamAnswered, outcome{}, metav1.Condition{Reason: mirrorsv1alpha1.ReasonUnreachable}, nil},
		{"upstream: never", upstreamAnswered, outcome{}, metav1.Condition{Reason: mirrorsv1alpha1.ReasonNeverReached}, []string{mirrorsv1alpha1.ReasonUpstreamNeverReached}},
		{"upstream: address refused", upstreamAnswered, outcome{}, metav1.Condition{Reason: mirrorsv1alpha1.ReasonAddressRefused}, []string{mirrorsv1alpha1.ReasonUpstreamAddressRefused}},
	} {
		assert.Equal(t, tc.want, reasons(tc.check(tc.o, tc.upstream)), tc.name)
	}
}

// TestReadyChecksOrder pins the order Ready's reason follows: the registry, the node
// agents, the registry's answer, the upstream.
func TestReadyChecksOrder(t *testing.T) {
	var names []string
	for _, c := range readyChecks {
		name := runtime.FuncForPC(reflect.ValueOf(c).Pointer()).Name()
		names = append(names, name[strings.LastIndex(name, ".")+1:])
	}
	assert.Equal(t, []string{"registryServes", "nodeAgentsReady", "registryAnswers", "upstreamAnswered"}, names)
}
