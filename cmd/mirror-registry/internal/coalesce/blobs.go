package coalesce

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/distribution/distribution/v3"
	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"
	v1 "github.com/opencontainers/image-spec/specs-go/v1"
)

// blobs is the proxy blob store of one request's repository, coalescing its misses.
type blobs struct {
	distribution.BlobStore
	name reference.Named
	c    *Coalescer
}

// ServeBlob serves a blob the storage holds as the proxy does; a miss joins (or starts) the
// blob's one fetch and streams from it.
func (b *blobs) ServeBlob(ctx context.Context, w http.ResponseWriter, r *http.Request, d digest.Digest) error {
	if r == nil || (r.Method != http.MethodGet && r.Method != http.MethodHead) || b.c.stored(ctx, b.name, d) {
		return b.BlobStore.ServeBlob(ctx, w, r, d)
	}
	f, joined, err := b.c.join(ctx, b.BlobStore, b.name, d)
	if err != nil {
		b.c.log.WithError(err).Warn("Could not coalesce a blob fetch; fetching it for this request alone")
		return b.BlobStore.ServeBlob(ctx, w, r, d)
	}
	defer f.release()
	if joined {
		b.c.stats.waiterJoined()
	}
	return serveFromFlight(ctx, w, r, f)
}

// Stat answers from a fetch in flight when it knows the blob (the blob handler stats before
// it serves, and the proxy's Stat of a miss asks the upstream), else as the proxy does.
func (b *blobs) Stat(ctx context.Context, d digest.Digest) (v1.Descriptor, error) {
	if f := b.c.inFlight(b.name, d); f != nil {
		defer f.release()
		f.mu.Lock()
		header, size := f.header, f.size
		f.mu.Unlock()
		if header != nil {
			return v1.Descriptor{MediaType: header.Get("Content-Type"), Digest: d, Size: size}, nil
		}
	}
	return b.BlobStore.Stat(ctx, d)
}

// serveFromFlight writes the blob, or the requested range of it, as it arrives. Before the
// status is written a failed fetch is returned as an error (the registry answers it); after,
// the connection is aborted, so that the client sees a body short of its Content-Length and
// nothing is appended to it (an error returned here would be: the handler writes its JSON).
func serveFromFlight(ctx context.Context, w http.ResponseWriter, r *http.Request, f *flight) error {
	header, size, err := f.descriptor(ctx)
	if err != nil {
		return err
	}
	for k, v := range header {
		w.Header()[k] = v
	}
	start, length, status := int64(0), size, http.StatusOK
	if r.Method == http.MethodGet {
		if rng, ok := parseRange(r.Header.Get("Range"), size); ok {
			if !rng.satisfiable {
				w.Header().Set("Content-Range", fmt.Sprintf("bytes */%d", size))
				w.Header().Del("Content-Length")
				http.Error(w, "requested range not satisfiable", http.StatusRequestedRangeNotSatisfiable)
				return nil
			}
			start, length, status = rng.start, rng.length, http.StatusPartialContent
			w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", start, start+length-1, size))
			w.Header().Set("Content-Length", strconv.FormatInt(length, 10))
		}
	}
	w.Header().Set("Accept-Ranges", "bytes")
	w.WriteHeader(status)
	if r.Method == http.MethodHead {
		return nil
	}
	// The status goes out now, not with the first bytes: a range beyond what has arrived
	// may wait long, and a client should not take that wait for a dead server.
	_ = http.NewResponseController(w).Flush()
	buf := make([]byte, 32<<10)
	for off, end := start, start+length; off < end; {
		n, err := f.readAt(ctx, buf[:min(int64(len(buf)), end-off)], off)
		if err != nil {
			if ctx.Err() != nil {
				return err // the client left: the fetch goes on for the others
			}
			panic(http.ErrAbortHandler)
		}
		if n == 0 { // done short of end: finish would have failed the flight
			panic(http.ErrAbortHandler)
		}
		if _, err := w.Write(buf[:n]); err != nil {
			return err
		}
		off += int64(n)
	}
	return nil
}

// byteRange is one range of a blob of known size.
type byteRange struct {
	start, length int64
	satisfiable   bool
}

// parseRange reads a Range header of one range ("bytes=a-b", "bytes=a-", "bytes=-n") of a
// blob of size bytes. ok is false when there is no range to honour: no header, several
// ranges, another unit, or a malformed one; the whole blob is then served with 200, as RFC
// 9110 lets a server ignore Range.
func parseRange(h string, size int64) (r byteRange, ok bool) {
	spec, found := strings.CutPrefix(h, "bytes=")
	if !found || strings.Contains(spec, ",") {
		return byteRange{}, false
	}
	first, last, found := strings.Cut(strings.TrimSpace(spec), "-")
	if !found {
		return byteRange{}, false
	}
	if first == "" { // suffix: the last n bytes
		n, err := strconv.ParseInt(last, 10, 64)
		if err != nil || n < 0 {
			return byteRange{}, false
		}
		if n == 0 || size == 0 {
			return byteRange{}, true
		}
		n = min(n, size)
		return byteRange{start: size - n, length: n, satisfiable: true}, true
	}
	a, err := strconv.ParseInt(first, 10, 64)
	if err != nil || a < 0 {
		return byteRange{}, false
	}
	b := size - 1
	if last != "" {
		if b, err = strconv.ParseInt(last, 10, 64); err != nil || b < a {
			return byteRange{}, false
		}
		b = min(b, size-1)
	}
	if a >= size {
		return byteRange{}, true
	}
	return byteRange{start: a, length: b - a + 1, satisfiable: true}, true
}
