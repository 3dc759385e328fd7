package retention

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Metrics go to the default Prometheus registry, which the registry's debug server serves
// (http.debug.prometheus) next to distribution's registry_proxy_* counters.
var (
	recordsGauge = gauge("quartet_mirror_cached_digests",
		"Manifests and blobs in the cache with a recorded last use.")
	pinnedGauge = gauge("quartet_mirror_pinned_digests",
		"Cached manifests and blobs kept because a pinned digest is, or references, them.")
	pinnedImagesGauge = gauge("quartet_mirror_pinned_images",
		"Images in the pinned-digests file at the last warm pass.")
	pinnedCachedGauge = gauge("quartet_mirror_pinned_images_cached",
		"Pinned images the cache held whole (manifests of the warmed platforms, configs, layers) at the last warm pass.")
	evictionsTotal = counterVec("quartet_mirror_evictions_total",
		"Manifests and blobs deleted from the cache, by reason.", "reason")
	evictedBytesTotal = counterVec("quartet_mirror_evicted_bytes_total",
		"Bytes of manifests and blobs deleted from the cache, by reason.", "reason")
	evictionFailuresTotal = promauto.NewCounter(prometheus.CounterOpts{Name: "quartet_mirror_eviction_failures_total",
		Help: "Deletions from the cache that failed (retried at the next pass)."})
	diskUsedBytes = gauge("quartet_mirror_disk_used_bytes",
		"Used bytes of the filesystem holding the cache.")
	diskCapacityBytes = gauge("quartet_mirror_disk_capacity_bytes",
		"Capacity in bytes of the filesystem holding the cache (used plus available).")
)

// The blob pulls Traffic counts, by hit and miss, and their bytes.
var (
	blobPullsTotal = counterVec("quartet_mirror_blob_pulls_total",
		"Blob GETs served, by result: hit (from the cache) or miss (fetched from the upstream).", "result")
	servedBytesTotal = counterVec("quartet_mirror_served_bytes_total",
		"Bytes of blobs served, by source: cache or upstream.", "source")
)

// gauge and counterVec create a metric and register it in the default registry.
func gauge(name, help string) prometheus.Gauge {
	return promauto.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
}

func counterVec(name, help, label string) *prometheus.CounterVec {
	return promauto.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{label})
}
