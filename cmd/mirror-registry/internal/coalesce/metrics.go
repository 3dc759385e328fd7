package coalesce

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Metrics go to the default Prometheus registry, next to retention's (quartet_mirror_*):
// bytes served from the cache are quartet_mirror_served_bytes_total{source="cache"} there.
var (
	upstreamFetchesTotal = counter("quartet_mirror_coalesced_fetches_total",
		"Blob fetches started for requests the storage could not serve, each shared by all requests for the blob while it ran.")
	upstreamFailuresTotal = counter("quartet_mirror_coalesced_fetch_failures_total",
		"Blob fetches that failed (their waiters saw an error or a broken stream; nothing was cached).")
	upstreamBytesTotal = counter("quartet_mirror_coalesced_fetched_bytes_total",
		"Bytes received by blob fetches (from the upstream, or from the storage when the blob landed there meanwhile).")
	coalescedWaitersTotal = counter("quartet_mirror_coalesced_waiters_total",
		"Blob requests served from a fetch another request had started, instead of a fetch of their own.")
	coalescedManifestWaitersTotal = counter("quartet_mirror_coalesced_manifest_waiters_total",
		"Manifest requests answered by the Get another request had started, instead of a Get of their own.")
)

func counter(name, help string) prometheus.Counter {
	return promauto.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
}
