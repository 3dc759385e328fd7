package retention

import "github.com/prometheus/client_golang/prometheus"

// Metrics go to the default Prometheus registry, which the registry's debug server serves
// (http.debug.prometheus) next to distribution's registry_proxy_* counters.
var (
	recordsGauge = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "quartet_mirror_cached_digests",
		Help: "Manifests and blobs in the cache with a recorded last use.",
	})
	pinnedGauge = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "quartet_mirror_pinned_digests",
		Help: "Cached manifests and blobs kept because a pinned digest is, or references, them.",
	})
	pinnedImagesGauge = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "quartet_mirror_pinned_images",
		Help: "Images in the pinned-digests file at the last warm pass.",
	})
	pinnedCachedGauge = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "quartet_mirror_pinned_images_cached",
		Help: "Pinned images the cache held whole (manifests of the warmed platforms, configs, layers) at the last warm pass.",
	})
	evictionsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "quartet_mirror_evictions_total",
		Help: "Manifests and blobs deleted from the cache, by reason.",
	}, []string{"reason"})
	evictedBytesTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "quartet_mirror_evicted_bytes_total",
		Help: "Bytes of manifests and blobs deleted from the cache, by reason.",
	}, []string{"reason"})
	evictionFailuresTotal = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "quartet_mirror_eviction_failures_total",
		Help: "Deletions from the cache that failed (retried at the next pass).",
	})
	diskUsedBytes = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "quartet_mirror_disk_used_bytes",
		Help: "Used bytes of the filesystem holding the cache.",
	})
	diskCapacityBytes = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "quartet_mirror_disk_capacity_bytes",
		Help: "Capacity in bytes of the filesystem holding the cache (used plus available).",
	})
)

// The blob pulls Traffic counts, by hit and miss, and their bytes.
var (
	blobPullsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "quartet_mirror_blob_pulls_total",
		Help: "Blob GETs served, by result: hit (from the cache) or miss (fetched from the upstream).",
	}, []string{"result"})
	servedBytesTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "quartet_mirror_served_bytes_total",
		Help: "Bytes of blobs served, by source: cache or upstream.",
	}, []string{"source"})
)

func init() {
	prometheus.MustRegister(recordsGauge, pinnedGauge, pinnedImagesGauge, pinnedCachedGauge, evictionsTotal, evictedBytesTotal,
		evictionFailuresTotal, diskUsedBytes, diskCapacityBytes, blobPullsTotal, servedBytesTotal)
}
