package coalesce

import (
	"sync/atomic"

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

// Stats counts a Coalescer's work since it was made (in GET /quartet/cache, for the operator):
// the same counts as the Prometheus counters above, which are process-wide.
type Stats struct {
	// UpstreamFetches is the blob fetches started, each shared by all requests for the blob while it ran.
	UpstreamFetches uint64 `json:"upstreamFetches"`
	// UpstreamFetchFailures is the blob fetches that failed.
	UpstreamFetchFailures uint64 `json:"upstreamFetchFailures"`
	// UpstreamFetchedBytes is the bytes the blob fetches received, each blob's once however
	// many requests read it (from the upstream, or from the storage when the blob landed there meanwhile).
	UpstreamFetchedBytes uint64 `json:"upstreamFetchedBytes"`
	// CoalescedWaiters is the blob requests that read a fetch another request had started.
	CoalescedWaiters uint64 `json:"coalescedWaiters"`
	// CoalescedManifestWaiters is the manifest requests answered by another request's Get.
	CoalescedManifestWaiters uint64 `json:"coalescedManifestWaiters"`
}

// stats keeps a Coalescer's Stats; each method counts in the Prometheus counter too.
type stats struct {
	fetches, failures, fetchedBytes, waiters, manifestWaiters atomic.Uint64
}

func (s *stats) fetchStarted() {
	s.fetches.Add(1)
	upstreamFetchesTotal.Inc()
}

func (s *stats) fetchEnded(bytes int64, failed bool) {
	bytes = max(bytes, 0)
	s.fetchedBytes.Add(uint64(bytes))
	upstreamBytesTotal.Add(float64(bytes))
	if failed {
		s.failures.Add(1)
		upstreamFailuresTotal.Inc()
	}
}

func (s *stats) waiterJoined() {
	s.waiters.Add(1)
	coalescedWaitersTotal.Inc()
}

func (s *stats) manifestWaiterJoined() {
	s.manifestWaiters.Add(1)
	coalescedManifestWaitersTotal.Inc()
}

// Stats returns the counts so far.
func (c *Coalescer) Stats() Stats {
	return Stats{UpstreamFetches: c.stats.fetches.Load(), UpstreamFetchFailures: c.stats.failures.Load(),
		UpstreamFetchedBytes: c.stats.fetchedBytes.Load(), CoalescedWaiters: c.stats.waiters.Load(),
		CoalescedManifestWaiters: c.stats.manifestWaiters.Load()}
}
