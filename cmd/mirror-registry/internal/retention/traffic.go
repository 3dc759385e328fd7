package retention

import (
	"context"
	"net/http"
	"sync/atomic"

	"github.com/opencontainers/go-digest"
)

// Traffic counts the blob GETs the registry served (layers and configs, the bulk of a pull)
// since it started, by source: its storage (a hit) or the upstream (a miss). Manifests are
// not counted: resolving a tag asks the upstream whenever it answers, hit or not.
type Traffic struct {
	stored func(ctx context.Context, d digest.Digest) bool // whether the storage holds d's data, before serving it

	hits, misses                      atomic.Uint64
	bytesFromCache, bytesFromUpstream atomic.Uint64
}

// TrafficReport is a snapshot of Traffic (in GET /quartet/cache).
type TrafficReport struct {
	BlobHits          uint64 `json:"blobHits"`
	BlobMisses        uint64 `json:"blobMisses"`
	BytesFromCache    uint64 `json:"bytesFromCache"`
	BytesFromUpstream uint64 `json:"bytesFromUpstream"`
}

// served counts one blob GET that wrote n bytes.
func (t *Traffic) served(hit bool, n int64) {
	n = max(n, 0)
	pulls, bytes, result, source := &t.misses, &t.bytesFromUpstream, "miss", "upstream"
	if hit {
		pulls, bytes, result, source = &t.hits, &t.bytesFromCache, "hit", "cache"
	}
	pulls.Add(1)
	bytes.Add(uint64(n))
	blobPullsTotal.WithLabelValues(result).Inc()
	servedBytesTotal.WithLabelValues(source).Add(float64(n))
}

// Report returns the counts so far.
func (t *Traffic) Report() TrafficReport {
	return TrafficReport{BlobHits: t.hits.Load(), BlobMisses: t.misses.Load(),
		BytesFromCache: t.bytesFromCache.Load(), BytesFromUpstream: t.bytesFromUpstream.Load()}
}

// countingResponseWriter counts the body bytes written through it.
type countingResponseWriter struct {
	http.ResponseWriter
	n int64
}

func (w *countingResponseWriter) Write(p []byte) (int, error) {
	n, err := w.ResponseWriter.Write(p)
	w.n += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach the real writer.
func (w *countingResponseWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
