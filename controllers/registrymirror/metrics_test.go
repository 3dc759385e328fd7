package registrymirror

import (
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	mirrorsv1alpha1 "github.com/quartet-operator/quartet/api/mirrors/v1alpha1"
	"github.com/quartet-operator/quartet/test/testenv"
)

// TestCacheReportSeries: the blob pulls and bytes are the registry's own counts as it last
// reported them, a counter that starts again when the registry restarted (a lower count),
// and go with the mirror.
func TestCacheReportSeries(t *testing.T) {
	key := types.NamespacedName{Namespace: "metrics-test", Name: "m"}
	hits := func() float64 { return testutil.ToFloat64(blobPulls.WithLabelValues(key.Namespace, key.Name, "hit")) }
	recordStatus(key, minimalMirror().Status, &CacheReport{BlobHits: 5, BlobMisses: 2, BytesFromCache: 1 << 40})
	assert.Equal(t, 5.0, hits())
	assert.Equal(t, float64(1<<40), testutil.ToFloat64(servedBytes.WithLabelValues(key.Namespace, key.Name, "cache")))
	recordStatus(key, minimalMirror().Status, nil)
	assert.Equal(t, 5.0, hits(), "a pass without a report leaves the last values")
	recordStatus(key, minimalMirror().Status, &CacheReport{BlobHits: 9})
	assert.Equal(t, 9.0, hits())
	recordStatus(key, minimalMirror().Status, &CacheReport{BlobHits: 3})
	assert.Equal(t, 3.0, hits(), "the registry restarted: its count starts again")
	forgetMirror(key)
	mirror := map[string]string{"mirror_namespace": key.Namespace, "mirror": key.Name}
	assert.Zero(t, testenv.Series(blobPulls, mirror)+testenv.Series(servedBytes, mirror), "forgotten with the mirror")
}

// TestCoalescingSeries (issue 42): the fetches behind the misses, each blob's bytes once
// however many requests waited, and the waiters by kind, as the registry last reported them;
// gone with the mirror.
func TestCoalescingSeries(t *testing.T) {
	key := types.NamespacedName{Namespace: "metrics-test", Name: "coalescing"}
	mirror := map[string]string{"mirror_namespace": key.Namespace, "mirror": key.Name}
	rep := &CacheReport{BlobMisses: 50, BytesFromUpstream: 50 << 20, UpstreamFetches: 2, UpstreamFetchFailures: 1,
		UpstreamFetchedBytes: 1 << 20, CoalescedWaiters: 48, CoalescedManifestWaiters: 9}
	recordStatus(key, minimalMirror().Status, rep)
	value := func(vec *prometheus.CounterVec, labels ...string) float64 {
		return testutil.ToFloat64(vec.WithLabelValues(append([]string{key.Namespace, key.Name}, labels...)...))
	}
	assert.Equal(t, 2.0, value(upstreamFetches))
	assert.Equal(t, 1.0, value(upstreamFetchFailures))
	assert.Equal(t, float64(1<<20), value(upstreamFetchedBytes), "once, not the 50 MiB served")
	assert.Equal(t, 48.0, value(coalescedWaiters, "blob"))
	assert.Equal(t, 9.0, value(coalescedWaiters, "manifest"))
	rep.UpstreamFetches, rep.CoalescedWaiters = 1, 0
	recordStatus(key, minimalMirror().Status, rep)
	assert.Equal(t, 1.0, value(upstreamFetches), "the registry restarted: its count starts again")
	forgetMirror(key)
	for _, vec := range []*prometheus.CounterVec{upstreamFetches, upstreamFetchFailures, upstreamFetchedBytes, coalescedWaiters} {
		assert.Zero(t, testenv.Series(vec, mirror), "forgotten with the mirror")
	}
}

// TestStatusSeries: the replicas serving and whether the upstream answers, from the status;
// UpstreamReachable Unknown (not probed yet) counts as unreachable; gone with the mirror.
func TestStatusSeries(t *testing.T) {
	key := types.NamespacedName{Namespace: "metrics-test", Name: "status"}
	mirror := map[string]string{"mirror_namespace": key.Namespace, "mirror": key.Name}
	reachable := func() float64 {
		return testutil.ToFloat64(upstreamReachableGauge.WithLabelValues(key.Namespace, key.Name))
	}
	replicas := func() float64 { return testutil.ToFloat64(readyReplicasGauge.WithLabelValues(key.Namespace, key.Name)) }
	withUpstream := func(s metav1.ConditionStatus, ready int32) mirrorsv1alpha1.RegistryMirrorStatus {
		return mirrorsv1alpha1.RegistryMirrorStatus{ReadyReplicas: ready, Conditions: []metav1.Condition{
			{Type: mirrorsv1alpha1.ConditionUpstreamReachable, Status: s, Reason: "Test"}}}
	}
	for _, tc := range []struct {
		name             string
		st               mirrorsv1alpha1.RegistryMirrorStatus
		reachable, ready float64
	}{
		{"no conditions yet", mirrorsv1alpha1.RegistryMirrorStatus{}, 0, 0},
		{"reachable, two serving", withUpstream(metav1.ConditionTrue, 2), 1, 2},
		{"unreachable, one serving", withUpstream(metav1.ConditionFalse, 1), 0, 1},
		{"not probed yet", withUpstream(metav1.ConditionUnknown, 3), 0, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			recordStatus(key, tc.st, nil)
			assert.Equal(t, tc.reachable, reachable())
			assert.Equal(t, tc.ready, replicas())
		})
	}
	forgetMirror(key)
	assert.Zero(t, testenv.Series(upstreamReachableGauge, mirror)+testenv.Series(readyReplicasGauge, mirror), "forgotten with the mirror")
}

// TestPinnedSeries: the pinned list's length and the namespaces it is shared among, per
// mirror; per namespace only for the maxNamespaceSeries namespaces with the most pinned,
// so many namespaces cannot multiply the series; none without node access; kept while the
// list is (pods not listed); gone with the mirror.
func TestPinnedSeries(t *testing.T) {
	key := types.NamespacedName{Namespace: "metrics-test", Name: "pins"}
	mirror := map[string]string{"mirror_namespace": key.Namespace, "mirror": key.Name}
	byNamespace := map[string]int{}
	for i := range 50 {
		byNamespace[fmt.Sprintf("ns-%02d", i)] = 1
	}
	byNamespace["big"], byNamespace["bigger"] = 40, 41
	recordPinned(key, true, &pinnedList{images: make([]imageInUse, 131), inUse: 500, byNamespace: byNamespace})
	assert.Equal(t, 131.0, testutil.ToFloat64(pinnedImagesGauge.WithLabelValues(key.Namespace, key.Name)))
	assert.Equal(t, 52.0, testutil.ToFloat64(namespacesInUseGauge.WithLabelValues(key.Namespace, key.Name)))
	assert.Equal(t, maxNamespaceSeries, testenv.Series(pinnedByNamespaceGauge, mirror), "bounded")
	assert.Equal(t, 41.0, testutil.ToFloat64(pinnedByNamespaceGauge.WithLabelValues(key.Namespace, key.Name, "bigger")))
	assert.Equal(t, 1, testenv.Series(pinnedByNamespaceGauge, map[string]string{"mirror": key.Name, "namespace": "ns-07"}), "then by name")
	assert.Zero(t, testenv.Series(pinnedByNamespaceGauge, map[string]string{"mirror": key.Name, "namespace": "ns-08"}))

	recordPinned(key, true, &pinnedList{images: make([]imageInUse, 3), inUse: 3, byNamespace: map[string]int{"ns-49": 3}})
	assert.Equal(t, 1, testenv.Series(pinnedByNamespaceGauge, mirror), "the namespaces that left the top are gone")
	assert.Equal(t, 3.0, testutil.ToFloat64(pinnedByNamespaceGauge.WithLabelValues(key.Namespace, key.Name, "ns-49")))
	recordPinned(key, true, nil)
	assert.Equal(t, 1, testenv.Series(pinnedByNamespaceGauge, mirror), "kept while the list is")
	assert.Equal(t, 1, testenv.Series(pinnedImagesGauge, mirror))

	recordPinned(key, false, nil)
	assert.Zero(t, testenv.Series(pinnedByNamespaceGauge, mirror)+testenv.Series(pinnedImagesGauge, mirror)+testenv.Series(namespacesInUseGauge, mirror),
		"none without node access")
	recordPinned(key, true, &pinnedList{images: make([]imageInUse, 1), inUse: 1, byNamespace: map[string]int{"a": 1}})
	forgetMirror(key)
	assert.Zero(t, testenv.Series(pinnedByNamespaceGauge, mirror)+testenv.Series(pinnedImagesGauge, mirror)+testenv.Series(namespacesInUseGauge, mirror),
		"forgotten with the mirror")
}
