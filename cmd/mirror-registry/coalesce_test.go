package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quartet-operator/quartet/cmd/mirror-registry/internal/coalesce"
	"github.com/quartet-operator/quartet/cmd/mirror-registry/internal/retention"
)

// These tests hold the upstream midway through a blob (heldBlob) to see what the mirror's
// clients get while one fetch is in flight, and count the upstream's GETs of that blob.

// heldBlob is a blob the test upstream serves itself: it sends the first half, then waits for
// release (or, if failing, breaks the connection).
type heldBlob struct {
	content  []byte
	d        digest.Digest
	halfSent chan struct{} // closed when the first half is out
	release  chan struct{} // closed by the test to send the rest
	fail     bool          // break the connection instead of sending the rest
	once     sync.Once
}

// holdBlob uploads size random bytes to up and makes up serve them held.
func holdBlob(t *testing.T, up *upstream, size int, fail bool) *heldBlob {
	t.Helper()
	content := make([]byte, size)
	_, _ = rand.Read(content)
	b := &heldBlob{content: content, d: uploadBlob(t, up.URL, testRepo, content),
		halfSent: make(chan struct{}), release: make(chan struct{}), fail: fail}
	serve := func(w http.ResponseWriter, r *http.Request, d digest.Digest) bool {
		if d != b.d || r.Header.Get("Range") != "" {
			return false
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(b.content)))
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Docker-Content-Digest", b.d.String())
		half := len(b.content) / 2
		_, _ = w.Write(b.content[:half])
		http.NewResponseController(w).Flush() //nolint:errcheck // a test server's flush
		b.once.Do(func() { close(b.halfSent) })
		select {
		case <-b.release:
		case <-r.Context().Done():
			return true
		}
		if b.fail {
			panic(http.ErrAbortHandler) // the connection breaks mid-blob
		}
		_, _ = w.Write(b.content[half:])
		return true
	}
	up.intercept.Store(&serve)
	t.Cleanup(func() { b.unhold() })
	return b
}

// unhold releases the upstream (once).
func (b *heldBlob) unhold() {
	select {
	case <-b.release:
	default:
		close(b.release)
	}
}

// streamingClient has no overall timeout: a test's context bounds each request.
var streamingClient = &http.Client{}

// startGet sends a GET of the blob to the mirror and returns the response, the body still to read.
func startGet(ctx context.Context, t *testing.T, mirrorURL string, d digest.Digest, header http.Header) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, mirrorURL+"/v2/"+testRepo+"/blobs/"+d.String(), nil)
	require.NoError(t, err)
	for k, v := range header {
		req.Header[k] = v
	}
	return streamingClient.Do(req)
}

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// 50 clients ask for a 16 MiB blob the mirror does not hold: the upstream is asked once;
// every client gets its first bytes while the upstream is still held at half, then the whole
// blob, digest checked; and the storage holds the blob afterwards.
func TestCoalesceManyWaitersOneUpstreamFetchStreamed(t *testing.T) {
	up := startUpstream(t)
	m := startMirror(t, up.URL, retention.NewFakeClock(at(0)), mirrorOptions{retention: time.Hour})
	blob := holdBlob(t, up, 16<<20, false)
	ctx := testContext(t)

	const clients = 50
	firstBytes := make(chan struct{}, clients)
	results := make(chan error, clients)
	for range clients {
		go func() {
			resp, err := startGet(ctx, t, m.URL, blob.d, nil)
			if err != nil {
				results <- err
				return
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				results <- fmt.Errorf("status %d", resp.StatusCode)
				return
			}
			first := make([]byte, 1)
			if _, err := io.ReadFull(resp.Body, first); err != nil {
				results <- err
				return
			}
			firstBytes <- struct{}{}
			rest, err := io.ReadAll(resp.Body)
			if err != nil {
				results <- err
				return
			}
			if got := digest.FromBytes(append(first, rest...)); got != blob.d {
				results <- fmt.Errorf("got %d bytes of digest %s", 1+len(rest), got)
				return
			}
			results <- nil
		}()
	}
	for i := range clients {
		select {
		case <-firstBytes:
		case err := <-results:
			require.NoError(t, err, "client failed before its first byte")
			require.Failf(t, "a client finished while the upstream was held", "after %d first bytes", i)
		case <-ctx.Done():
			require.Failf(t, "timed out", "%d of %d clients got their first bytes while the upstream was held", i, clients)
		}
	}
	assert.Equal(t, clients, m.coalescer.Waiters(testRepo, blob.d), "every client reads the one fetch")
	blob.unhold()
	for range clients {
		require.NoError(t, <-results)
	}
	assert.Equal(t, 1, up.gets(blob.d), "one upstream GET for all clients")
	assert.Equal(t, allTrue([]digest.Digest{blob.d}, true), m.stored([]digest.Digest{blob.d}), "the proxy committed the blob")
	// The fetch counted itself before it released the blob's last byte.
	assert.Equal(t, coalesce.Stats{UpstreamFetches: 1, UpstreamFetchedBytes: 16 << 20, CoalescedWaiters: clients - 1}, m.report(t).Stats,
		"GET /quartet/cache: one fetch of the blob's bytes, shared by every other client")

	resp := do(t, mustRequest(t, http.MethodGet, m.URL+"/v2/"+testRepo+"/blobs/"+blob.d.String(), nil))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, blob.d, digest.FromBytes(resp.body))
	assert.Equal(t, 1, up.gets(blob.d), "a later GET is a cache hit")
}

// The client that started the fetch and another one leave mid-blob: the fetch goes on, the
// remaining clients get the whole blob, and the cache holds it, from one upstream GET.
func TestCoalesceWaitersThatLeaveDoNotDisturbTheFetch(t *testing.T) {
	up := startUpstream(t)
	m := startMirror(t, up.URL, retention.NewFakeClock(at(0)), mirrorOptions{retention: time.Hour})
	blob := holdBlob(t, up, 4<<20, false)
	ctx := testContext(t)

	leaderCtx, leave := context.WithCancel(ctx)
	leader, err := startGet(leaderCtx, t, m.URL, blob.d, nil)
	require.NoError(t, err)
	<-blob.halfSent
	leaverCtx, leave2 := context.WithCancel(ctx)
	leaver, err := startGet(leaverCtx, t, m.URL, blob.d, nil)
	require.NoError(t, err)
	stayers := make([]*http.Response, 3)
	for i := range stayers {
		stayers[i], err = startGet(ctx, t, m.URL, blob.d, nil)
		require.NoError(t, err)
	}
	for _, resp := range append([]*http.Response{leader, leaver}, stayers...) {
		_, err := io.ReadFull(resp.Body, make([]byte, 1024))
		require.NoError(t, err, "the first bytes arrive while the upstream is held")
	}
	leave()
	leave2()
	_ = leader.Body.Close()
	_ = leaver.Body.Close()
	require.Eventually(t, func() bool { return m.coalescer.Waiters(testRepo, blob.d) == len(stayers) },
		10*time.Second, 10*time.Millisecond, "the leaving clients' requests ended")
	blob.unhold()
	for _, resp := range stayers {
		rest, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		_ = resp.Body.Close()
		assert.Equal(t, blob.content[1024:], rest)
	}
	assert.Equal(t, 1, up.gets(blob.d))
	require.Eventually(t, func() bool { return m.stored([]digest.Digest{blob.d})[blob.d] },
		10*time.Second, 10*time.Millisecond, "the fetch filled the cache")
}

// The upstream breaks the connection mid-blob: every client's body ends short with an error
// (never a complete-looking body), the cache does not hold the blob, and the next GET fetches
// it anew and succeeds.
func TestCoalesceUpstreamFailureFailsEveryWaiterAndCachesNothing(t *testing.T) {
	up := startUpstream(t)
	m := startMirror(t, up.URL, retention.NewFakeClock(at(0)), mirrorOptions{retention: time.Hour})
	blob := holdBlob(t, up, 4<<20, true)
	ctx := testContext(t)

	resps := make([]*http.Response, 4)
	for i := range resps {
		var err error
		resps[i], err = startGet(ctx, t, m.URL, blob.d, nil)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resps[i].StatusCode)
		require.Equal(t, int64(len(blob.content)), resps[i].ContentLength)
		if i == 0 {
			<-blob.halfSent
		}
	}
	blob.unhold()
	for _, resp := range resps {
		body, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		require.Error(t, err, "a broken fetch breaks the client's stream")
		assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
		assert.Less(t, len(body), len(blob.content))
		assert.Equal(t, blob.content[:len(body)], body, "what arrived is the blob's start")
	}
	assert.Equal(t, 1, up.gets(blob.d))
	assert.False(t, m.stored([]digest.Digest{blob.d})[blob.d], "nothing partial is cached")
	rep := m.report(t)
	assert.Equal(t, coalesce.Stats{UpstreamFetches: 1, UpstreamFetchFailures: 1, UpstreamFetchedBytes: rep.UpstreamFetchedBytes,
		CoalescedWaiters: uint64(len(resps) - 1)}, rep.Stats)
	assert.Less(t, rep.UpstreamFetchedBytes, uint64(len(blob.content)), "the fetch broke before the blob's end")

	blob.fail = false // read by the next upstream request only, after this write
	up.intercept.Store(nil)
	resp := do(t, mustRequest(t, http.MethodGet, m.URL+"/v2/"+testRepo+"/blobs/"+blob.d.String(), nil))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, blob.d, digest.FromBytes(resp.body))
	assert.Equal(t, 2, up.gets(blob.d), "the next GET fetched the blob anew")
	require.Eventually(t, func() bool { return m.stored([]digest.Digest{blob.d})[blob.d] },
		10*time.Second, 10*time.Millisecond)
	assert.Equal(t, uint64(2), m.report(t).UpstreamFetches)
	assert.Equal(t, uint64(1), m.report(t).UpstreamFetchFailures)
}

// The upstream sends the blob's length of wrong bytes: the proxy refuses to commit them (the
// digest does not match), and the clients, held at least at the last byte until the commit,
// get a short body and a broken connection, never a whole body of the wrong blob.
func TestCoalesceCorruptBlobIsNeverServedWhole(t *testing.T) {
	up := startUpstream(t)
	m := startMirror(t, up.URL, retention.NewFakeClock(at(0)), mirrorOptions{retention: time.Hour})
	blob := holdBlob(t, up, 1<<20, false)
	blob.content = bytes.Clone(blob.content)
	blob.content[len(blob.content)-10] ^= 0xff
	ctx := testContext(t)

	resps := make([]*http.Response, 3)
	for i := range resps {
		var err error
		resps[i], err = startGet(ctx, t, m.URL, blob.d, nil)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resps[i].StatusCode)
		if i == 0 {
			<-blob.halfSent
		}
	}
	blob.unhold()
	for _, resp := range resps {
		body, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
		assert.Less(t, len(body), len(blob.content), "never the whole body")
	}
	assert.False(t, m.stored([]digest.Digest{blob.d})[blob.d])
	assert.Equal(t, 1, up.gets(blob.d))
}

// Range requests while the blob is in flight: a range already received is answered at once,
// a range beyond waits for its bytes, an unsatisfiable one gets 416, several ranges get the
// whole blob (200); one upstream GET for all.
func TestCoalesceRangeWhileInFlight(t *testing.T) {
	up := startUpstream(t)
	m := startMirror(t, up.URL, retention.NewFakeClock(at(0)), mirrorOptions{retention: time.Hour})
	blob := holdBlob(t, up, 1<<20, false)
	ctx := testContext(t)
	size := len(blob.content)

	first, err := startGet(ctx, t, m.URL, blob.d, nil)
	require.NoError(t, err)
	defer first.Body.Close()
	<-blob.halfSent
	get := func(rng string) (*http.Response, error) {
		return startGet(ctx, t, m.URL, blob.d, http.Header{"Range": {rng}})
	}

	early, err := get("bytes=100-199")
	require.NoError(t, err)
	require.Equal(t, http.StatusPartialContent, early.StatusCode)
	assert.Equal(t, fmt.Sprintf("bytes 100-199/%d", size), early.Header.Get("Content-Range"))
	body, err := io.ReadAll(early.Body)
	require.NoError(t, err, "a range already fetched is served while the upstream is held")
	assert.Equal(t, blob.content[100:200], body)

	unsatisfiable, err := get(fmt.Sprintf("bytes=%d-", size))
	require.NoError(t, err)
	_ = unsatisfiable.Body.Close()
	assert.Equal(t, http.StatusRequestedRangeNotSatisfiable, unsatisfiable.StatusCode)
	assert.Equal(t, fmt.Sprintf("bytes */%d", size), unsatisfiable.Header.Get("Content-Range"))

	late, err := get("bytes=-1000")
	require.NoError(t, err)
	require.Equal(t, http.StatusPartialContent, late.StatusCode)
	several, err := get("bytes=0-9,20-29")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, several.StatusCode, "several ranges: the whole blob")

	lateBody := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(late.Body)
		lateBody <- b
	}()
	select {
	case b := <-lateBody:
		require.Failf(t, "a range not fetched yet was answered", "%d bytes", len(b))
	case <-time.After(200 * time.Millisecond):
	}
	blob.unhold()
	assert.Equal(t, blob.content[size-1000:], <-lateBody)
	all, err := io.ReadAll(several.Body)
	require.NoError(t, err)
	_ = several.Body.Close()
	assert.Equal(t, blob.content, all)
	rest, err := io.ReadAll(first.Body)
	require.NoError(t, err)
	assert.Equal(t, size, len(rest))
	assert.Equal(t, 1, up.gets(blob.d))
}

// HEAD while a blob is in flight answers its size and digest without waiting for its end;
// a HEAD of a blob nobody fetches starts the fetch (the proxy cached on HEAD before, too).
func TestCoalesceHead(t *testing.T) {
	up := startUpstream(t)
	m := startMirror(t, up.URL, retention.NewFakeClock(at(0)), mirrorOptions{retention: time.Hour})
	blob := holdBlob(t, up, 1<<20, false)
	ctx := testContext(t)

	head := func() *http.Response {
		req, err := http.NewRequestWithContext(ctx, http.MethodHead, m.URL+"/v2/"+testRepo+"/blobs/"+blob.d.String(), nil)
		require.NoError(t, err)
		resp, err := streamingClient.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		return resp
	}
	resp := head()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, int64(len(blob.content)), resp.ContentLength)
	assert.Equal(t, blob.d.String(), resp.Header.Get("Docker-Content-Digest"))
	<-blob.halfSent
	assert.Equal(t, http.StatusOK, head().StatusCode, "a HEAD during the fetch")

	get, err := startGet(ctx, t, m.URL, blob.d, nil)
	require.NoError(t, err)
	blob.unhold()
	body, err := io.ReadAll(get.Body)
	require.NoError(t, err)
	_ = get.Body.Close()
	assert.True(t, bytes.Equal(blob.content, body))
	assert.Equal(t, 1, up.gets(blob.d), "HEADs and the GET shared one fetch")
	require.Eventually(t, func() bool { return m.stored([]digest.Digest{blob.d})[blob.d] },
		10*time.Second, 10*time.Millisecond)
	assert.Equal(t, http.StatusOK, head().StatusCode, "a HEAD of a cached blob")
	assert.Equal(t, 1, up.gets(blob.d))
}

// A fetch that receives nothing for the stall timeout fails its waiters (a broken stream),
// rather than holding them, and every later request for the blob, for ever.
func TestCoalesceStalledFetchFailsItsWaiters(t *testing.T) {
	up := startUpstream(t)
	m := startMirror(t, up.URL, retention.NewFakeClock(at(0)), mirrorOptions{retention: time.Hour, stallTimeout: 300 * time.Millisecond})
	blob := holdBlob(t, up, 1<<20, false) // never released
	ctx := testContext(t)

	resp, err := startGet(ctx, t, m.URL, blob.d, nil)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
	assert.LessOrEqual(t, len(body), len(blob.content)/2, "at most what the upstream sent")
	assert.Equal(t, 0, m.coalescer.Waiters(testRepo, blob.d), "the fetch ended")
	assert.False(t, m.stored([]digest.Digest{blob.d})[blob.d])
}

// Concurrent GETs of a manifest the mirror does not hold, by digest and by tag, share one
// upstream GET each; every client gets the manifest.
func TestCoalesceManifests(t *testing.T) {
	up := startUpstream(t)
	img := pushImage(t, up.URL, testRepo, "v1", 1, 1024)
	img2 := pushImage(t, up.URL, testRepo, "v2", 1, 1024)
	m := startMirror(t, up.URL, retention.NewFakeClock(at(0)), mirrorOptions{retention: time.Hour})
	up.manifestDelay.Store(int64(300 * time.Millisecond))

	const clients = 10
	for ref, want := range map[string]digest.Digest{img.manifest.String(): img.manifest, img2.tag: img2.manifest} {
		errs := make(chan error, clients)
		for range clients {
			go func() {
				req, err := http.NewRequest(http.MethodGet, m.URL+"/v2/"+testRepo+"/manifests/"+ref, nil)
				if err != nil {
					errs <- err
					return
				}
				req.Header.Set("Accept", ociManifest)
				resp, err := client.Do(req)
				if err != nil {
					errs <- err
					return
				}
				defer resp.Body.Close()
				body, err := io.ReadAll(resp.Body)
				if err == nil && (resp.StatusCode != http.StatusOK || digest.FromBytes(body) != want) {
					err = fmt.Errorf("%s: %d, digest %s", ref, resp.StatusCode, digest.FromBytes(body))
				}
				errs <- err
			}()
		}
		for range clients {
			require.NoError(t, <-errs)
		}
	}
	assert.Equal(t, 1, up.manifestGets(img.manifest.String()), "by digest: one upstream GET")
	assert.Equal(t, 1, up.manifestGets(img2.tag), "by tag: one upstream GET (the proxy's tag lookups, HEADs, are not shared)")
	assert.Equal(t, uint64(2*(clients-1)), m.report(t).CoalescedManifestWaiters, "all but one client per reference waited")
}

func TestCoalesceStaysOutOfErrorsBeforeTheStatus(t *testing.T) {
	up := startUpstream(t)
	m := startMirror(t, up.URL, retention.NewFakeClock(at(0)), mirrorOptions{retention: time.Hour})
	resp := do(t, mustRequest(t, http.MethodGet, m.URL+"/v2/"+testRepo+"/blobs/"+digest.FromString("absent").String(), nil))
	assert.Equal(t, http.StatusNotFound, resp.StatusCode, "a blob the upstream does not have")
	assert.Contains(t, string(resp.body), "BLOB_UNKNOWN")
}
