package registrymirror

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"

	mirrorsv1alpha1 "github.com/quartet-operator/quartet/api/mirrors/v1alpha1"
	"github.com/quartet-operator/quartet/internal/status"
)

// mirrorLabels label the series of one mirror.
var mirrorLabels = []string{"mirror_namespace", "mirror"}

var (
	// objectWrites stays flat in a steady cluster.
	objectWrites = status.Registered.NewCounterVec(prometheus.CounterOpts{Name: "quartet_registrymirror_object_writes_total",
		Help: "Writes to RegistryMirror children, by kind and result: server-side applies (created, updated, refused, failed), drift reverted (reverted), children deleted when no longer allowed or needed (deleted), and objects found owned by someone else (conflict)."},
		[]string{"kind", "result"})
	// readyGauge names the mirror that stopped serving (alert QuartetRegistryMirrorNotReady).
	readyGauge = status.Registered.NewGaugeVec(prometheus.GaugeOpts{Name: "quartet_registrymirror_ready",
		Help: "1 when the RegistryMirror's Ready condition is True, 0 when it is False or Unknown, by mirror."}, mirrorLabels)
	// No series without node access or a report (alert QuartetRegistryMirrorImagesNotCached).
	imagesInUseGauge = status.Registered.NewGaugeVec(prometheus.GaugeOpts{Name: "quartet_registrymirror_images_in_use",
		Help: "Distinct images by digest that the cluster's pods run from the host of a RegistryMirror with node access (status.imagesInUse), by mirror."}, mirrorLabels)
	// The pinned list (pinFairly): its length, and how the namespaces share it. A series
	// per namespace only for the maxNamespaceSeries with the most images pinned, so a
	// cluster of many namespaces adds at most that many series per mirror with node access.
	pinnedImagesGauge = status.Registered.NewGaugeVec(prometheus.GaugeOpts{Name: "quartet_registrymirror_pinned_images",
		Help: "Images the RegistryMirror pins and warms (at most --registrymirror-max-pinned-images, shared fairly among namespaces), by mirror with node access."}, mirrorLabels)
	namespacesInUseGauge = status.Registered.NewGaugeVec(prometheus.GaugeOpts{Name: "quartet_registrymirror_namespaces_in_use",
		Help: "Namespaces whose pods run images from the host of a RegistryMirror with node access, among which its pinned list is shared, by mirror."}, mirrorLabels)
	pinnedByNamespaceGauge = status.Registered.NewGaugeVec(prometheus.GaugeOpts{Name: "quartet_registrymirror_pinned_images_by_namespace",
		Help: fmt.Sprintf("Of the images a namespace's pods run from the RegistryMirror's host, how many the mirror pins, for the %d namespaces with the most pinned (then by name), by mirror.", maxNamespaceSeries)},
		[]string{"mirror_namespace", "mirror", "namespace"})
	imagesCachedGauge = status.Registered.NewGaugeVec(prometheus.GaugeOpts{Name: "quartet_registrymirror_images_cached",
		Help: "Of those images, how many the mirror's registry holds whole, as it last reported (status.imagesCached), by mirror."}, mirrorLabels)
	// The cache volume's fill, as last reported (alert QuartetRegistryMirrorCacheAlmostFull).
	cacheUsedGauge = status.Registered.NewGaugeVec(prometheus.GaugeOpts{Name: "quartet_registrymirror_cache_used_bytes",
		Help: "Used bytes of the RegistryMirror's cache volume, as its registry last reported, by mirror."}, mirrorLabels)
	cacheCapacityGauge = status.Registered.NewGaugeVec(prometheus.GaugeOpts{Name: "quartet_registrymirror_cache_capacity_bytes",
		Help: "Capacity in bytes (used plus available) of the RegistryMirror's cache volume, as its registry last reported, by mirror."}, mirrorLabels)
	readyReplicasGauge = status.Registered.NewGaugeVec(prometheus.GaugeOpts{Name: "quartet_registrymirror_ready_replicas",
		Help: "Registry replicas of the RegistryMirror that are ready to serve (status.readyReplicas), by mirror."}, mirrorLabels)
	upstreamReachableGauge = status.Registered.NewGaugeVec(prometheus.GaugeOpts{Name: "quartet_registrymirror_upstream_reachable",
		Help: "1 when the RegistryMirror's UpstreamReachable condition is True (the upstream answers the manager's probe), 0 when it is False or Unknown, by mirror."}, mirrorLabels)
	// The registry's own counts since it started, as it last reported them (setCounter).
	blobPulls = status.Registered.NewCounterVec(prometheus.CounterOpts{Name: "quartet_registrymirror_blob_pulls_total",
		Help: "Blob GETs (layers, configs) the RegistryMirror's registry served since it started, by result: hit (from its cache) or miss (fetched from the upstream), as it last reported, by mirror."},
		[]string{"mirror_namespace", "mirror", "result"})
	servedBytes = status.Registered.NewCounterVec(prometheus.CounterOpts{Name: "quartet_registrymirror_served_bytes_total",
		Help: "Bytes of blobs the RegistryMirror's registry served since it started, by source: cache or upstream, as it last reported, by mirror."},
		[]string{"mirror_namespace", "mirror", "source"})
	// The fetches behind the misses: one per blob however many requests waited (issue 42).
	// Started and failed fetches are two counters: a fetch counts as started when it starts
	// and as failed when it ends, so started minus failed is no counter.
	upstreamFetches = status.Registered.NewCounterVec(prometheus.CounterOpts{Name: "quartet_registrymirror_upstream_fetches_total",
		Help: "Blob fetches the RegistryMirror's registry started from the upstream since it started, each shared by all requests for the blob while it ran, as it last reported, by mirror."},
		mirrorLabels)
	upstreamFetchFailures = status.Registered.NewCounterVec(prometheus.CounterOpts{Name: "quartet_registrymirror_upstream_fetch_failures_total",
		Help: "Of those blob fetches, the ones that failed (their waiters saw an error, nothing was cached), as the registry last reported, by mirror."},
		mirrorLabels)
	upstreamFetchedBytes = status.Registered.NewCounterVec(prometheus.CounterOpts{Name: "quartet_registrymirror_upstream_fetched_bytes_total",
		Help: "Bytes the RegistryMirror's registry fetched from the upstream for blobs since it started, each blob once however many requests waited for it, as it last reported, by mirror."},
		mirrorLabels)
	coalescedWaiters = status.Registered.NewCounterVec(prometheus.CounterOpts{Name: "quartet_registrymirror_coalesced_waiters_total",
		Help: "Requests the RegistryMirror's registry answered from a fetch another request had started instead of one of their own, since it started, by kind: blob or manifest, as it last reported, by mirror."},
		[]string{"mirror_namespace", "mirror", "kind"})
)

// recordStatus sets the mirror's series from the status and the cache report (nil: kept).
func recordStatus(m types.NamespacedName, st mirrorsv1alpha1.RegistryMirrorStatus, rep *CacheReport) {
	status.SetGauge(readyGauge, meta.IsStatusConditionTrue(st.Conditions, mirrorsv1alpha1.ConditionReady), m.Namespace, m.Name)
	status.SetGauge(upstreamReachableGauge, meta.IsStatusConditionTrue(st.Conditions, mirrorsv1alpha1.ConditionUpstreamReachable), m.Namespace, m.Name)
	for vec, v := range map[*prometheus.GaugeVec]*int32{imagesInUseGauge: st.ImagesInUse, imagesCachedGauge: st.ImagesCached, readyReplicasGauge: &st.ReadyReplicas} {
		if v == nil {
			vec.DeleteLabelValues(m.Namespace, m.Name)
		} else {
			vec.WithLabelValues(m.Namespace, m.Name).Set(float64(*v))
		}
	}
	if rep == nil {
		return
	}
	setCounter(blobPulls, rep.BlobHits, m.Namespace, m.Name, "hit")
	setCounter(blobPulls, rep.BlobMisses, m.Namespace, m.Name, "miss")
	setCounter(servedBytes, rep.BytesFromCache, m.Namespace, m.Name, "cache")
	setCounter(servedBytes, rep.BytesFromUpstream, m.Namespace, m.Name, "upstream")
	setCounter(upstreamFetches, rep.UpstreamFetches, m.Namespace, m.Name)
	setCounter(upstreamFetchFailures, rep.UpstreamFetchFailures, m.Namespace, m.Name)
	setCounter(upstreamFetchedBytes, rep.UpstreamFetchedBytes, m.Namespace, m.Name)
	setCounter(coalescedWaiters, rep.CoalescedWaiters, m.Namespace, m.Name, "blob")
	setCounter(coalescedWaiters, rep.CoalescedManifestWaiters, m.Namespace, m.Name, "manifest")
	if rep.DiskCapacityBytes > 0 {
		cacheUsedGauge.WithLabelValues(m.Namespace, m.Name).Set(float64(rep.DiskUsedBytes))
		cacheCapacityGauge.WithLabelValues(m.Namespace, m.Name).Set(float64(rep.DiskCapacityBytes))
	}
}

// recordPinned sets the pinned list's series from the pass's list (nil: kept, as the list
// is); a mirror without node access has none.
func recordPinned(m types.NamespacedName, granted bool, list *pinnedList) {
	mirror := prometheus.Labels{"mirror_namespace": m.Namespace, "mirror": m.Name}
	if !granted {
		pinnedImagesGauge.DeleteLabelValues(m.Namespace, m.Name)
		namespacesInUseGauge.DeleteLabelValues(m.Namespace, m.Name)
		pinnedByNamespaceGauge.DeletePartialMatch(mirror)
		return
	}
	if list == nil {
		return
	}
	pinnedImagesGauge.WithLabelValues(m.Namespace, m.Name).Set(float64(len(list.images)))
	namespacesInUseGauge.WithLabelValues(m.Namespace, m.Name).Set(float64(len(list.byNamespace)))
	top := map[string]float64{}
	for _, ns := range topNamespaces(list.byNamespace, maxNamespaceSeries) {
		top[ns] = float64(list.byNamespace[ns])
	}
	// The namespaces that left the top lose their series.
	status.SetSeries(pinnedByNamespaceGauge, mirror, "namespace", top, true)
}

// topNamespaces returns the n namespaces with the most images pinned, then by name.
func topNamespaces(byNamespace map[string]int, n int) []string {
	names := slices.Collect(maps.Keys(byNamespace))
	slices.SortFunc(names, func(a, b string) int {
		return cmp.Or(cmp.Compare(byNamespace[b], byNamespace[a]), strings.Compare(a, b))
	})
	return names[:min(n, len(names))]
}

// setCounter sets a counter to v, from v again (a reset) when the registry restarted.
func setCounter(vec *prometheus.CounterVec, v uint64, labels ...string) {
	c := vec.WithLabelValues(labels...)
	var now dto.Metric
	if err := c.Write(&now); err == nil && float64(v) < now.GetCounter().GetValue() {
		vec.DeleteLabelValues(labels...)
		c, now = vec.WithLabelValues(labels...), dto.Metric{}
	}
	c.Add(float64(v) - now.GetCounter().GetValue())
}

// forgetMirror drops the series of a mirror that is gone.
func forgetMirror(m types.NamespacedName) {
	for _, vec := range []interface{ DeletePartialMatch(prometheus.Labels) int }{readyGauge, imagesInUseGauge, pinnedImagesGauge,
		namespacesInUseGauge, pinnedByNamespaceGauge, imagesCachedGauge, cacheUsedGauge, cacheCapacityGauge, blobPulls, servedBytes,
		upstreamFetches, upstreamFetchFailures, upstreamFetchedBytes, coalescedWaiters, readyReplicasGauge, upstreamReachableGauge} {
		vec.DeletePartialMatch(prometheus.Labels{"mirror_namespace": m.Namespace, "mirror": m.Name})
	}
}
