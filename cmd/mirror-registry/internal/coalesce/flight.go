package coalesce

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"
)

// errIncomplete is a fetch that ended without error but short of its Content-Length.
var errIncomplete = errors.New("the upstream fetch ended before the blob's Content-Length")

// flight is one upstream fetch of one blob. Its body goes to a temporary file as it arrives;
// every request for the blob (the one that started it included) reads that file behind the
// fetch. The fetch's own goroutine writes; readers wait on changed.
//
// mu guards everything below it. refs counts the fetch and the readers: the last one to let
// go closes and removes the file.
type flight struct {
	file *os.File

	mu      sync.Mutex
	header  http.Header // Content-Length, Content-Type, Docker-Content-Digest, Etag; nil until ready
	size    int64       // Content-Length, once ready
	written int64       // bytes in file
	done    bool
	err     error         // why the fetch failed, once done
	ready   chan struct{} // closed when header is set, or the fetch is done
	changed chan struct{} // closed (and replaced) whenever written or done changes
	refs    int
}

func newFlight(file *os.File) *flight {
	return &flight{file: file, ready: make(chan struct{}), changed: make(chan struct{}), refs: 1}
}

// acquire adds a reader; the caller holds the Coalescer's lock and found f in flights.
func (f *flight) acquire() {
	f.mu.Lock()
	f.refs++
	f.mu.Unlock()
}

// release lets go of the file; the last reference removes it.
func (f *flight) release() {
	f.mu.Lock()
	f.refs--
	last := f.refs == 0
	f.mu.Unlock()
	if last {
		_ = f.file.Close()
		_ = os.Remove(f.file.Name())
	}
}

// broadcastLocked wakes every waiting reader. f.mu is held.
func (f *flight) broadcastLocked() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// publishLocked makes the response header known to readers. f.mu is held.
func (f *flight) publishLocked(h http.Header) error {
	if f.header != nil {
		return nil
	}
	size, err := strconv.ParseInt(h.Get("Content-Length"), 10, 64)
	if err != nil || size < 0 {
		return fmt.Errorf("the fetch answered without a valid Content-Length (%q)", h.Get("Content-Length"))
	}
	f.header = http.Header{}
	for _, k := range []string{"Content-Length", "Content-Type", "Docker-Content-Digest", "Etag"} {
		if v := h.Get(k); v != "" {
			f.header.Set(k, v)
		}
	}
	f.size = size
	close(f.ready)
	return nil
}

// finish ends the fetch: err nil means the whole blob is in the file (and in the cache).
func (f *flight) finish(err error, h http.Header) {
	f.mu.Lock()
	if err == nil {
		err = f.publishLocked(h) // a blob of 0 bytes was never written
	}
	if err == nil && f.written != f.size {
		err = fmt.Errorf("%w: %d of %d bytes", errIncomplete, f.written, f.size)
	}
	f.done, f.err = true, err
	if f.header == nil {
		close(f.ready)
	}
	f.broadcastLocked()
	f.mu.Unlock()
	f.release()
}

// descriptor waits until the header is known; it returns it, or the fetch's error.
func (f *flight) descriptor(ctx context.Context) (http.Header, int64, error) {
	select {
	case <-f.ready:
	case <-ctx.Done():
		return nil, 0, ctx.Err()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.header == nil {
		return nil, 0, f.err
	}
	return f.header.Clone(), f.size, nil
}

// readAt reads the blob at off as soon as bytes are there, blocking while the fetch is
// behind: it returns at least one byte, or the fetch's error, or (0, nil) when off is at the
// blob's end. The blob's last byte is held until the fetch has ended well: the proxy has then
// committed the blob, its digest verified, so no client gets a whole body of a blob that
// failed, and a request that ends finds the blob in the cache, as without coalescing.
func (f *flight) readAt(ctx context.Context, p []byte, off int64) (int, error) {
	for {
		f.mu.Lock()
		written, done, err, changed := f.written, f.done, f.err, f.changed
		if !done {
			written = min(written, f.size-1)
		}
		f.mu.Unlock()
		if err != nil {
			return 0, err
		}
		if off < written {
			n := min(int64(len(p)), written-off)
			return f.file.ReadAt(p[:n], off)
		}
		if done {
			return 0, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// flightWriter is the http.ResponseWriter the fetch serves into: the body goes to the file.
// It restarts the stall timer at every write.
type flightWriter struct {
	f      *flight
	header http.Header
	status int
	stall  *time.Timer
	limit  time.Duration
}

func (w *flightWriter) Header() http.Header { return w.header }

func (w *flightWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

func (w *flightWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if w.status != http.StatusOK {
		return 0, fmt.Errorf("the fetch answered %d, not 200", w.status)
	}
	f := w.f
	f.mu.Lock()
	err := f.publishLocked(w.header)
	off := f.written
	f.mu.Unlock()
	if err != nil {
		return 0, err
	}
	if off+int64(len(p)) > f.size {
		return 0, fmt.Errorf("the fetch wrote more than its Content-Length %d", f.size)
	}
	n, err := f.file.WriteAt(p, off)
	f.mu.Lock()
	f.written += int64(n)
	f.broadcastLocked()
	f.mu.Unlock()
	w.stall.Reset(w.limit)
	return n, err
}
