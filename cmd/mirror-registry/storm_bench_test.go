package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distribution/distribution/v3/configuration"
	"github.com/opencontainers/go-digest"
	"github.com/stretchr/testify/require"

	"github.com/quartet-operator/quartet/cmd/mirror-registry/internal/retention"
)

// The storm benchmark's scale, from the environment so a quick run is possible.
const (
	stormMBEnv      = "QUARTET_STORM_MB"      // image size in MiB (default 256)
	stormClientsEnv = "QUARTET_STORM_CLIENTS" // client counts, comma-separated (default 1,10,50,200)
	stormLayers     = 8                       // the image's layers (plus a config)
)

// BenchmarkStorm (issue 42): 1, 10, 50 and 200 clients (QUARTET_STORM_CLIENTS) start
// together and each pulls the same multi-layer image of 256 MiB (QUARTET_STORM_MB; 8
// layers and a config) -- manifest, then every blob, digests verified -- from an
// in-process distribution upstream on loopback, through Quartet's mirror registry
// (in-process, as run assembles it: coalescing and retention) and through distribution
// v3.0.0 as a plain proxy (in-process handlers.NewApp, proxy.ttl 0, no middlewares).
// Each client count gets a fresh, empty cache. Cold: upstream-bytes/image is the bytes the
// upstream served (bodies, manifests included) over the image's size; cold-vs-1-client is
// the time until the last client has the image over the 1-client cold pull of the same
// proxy in the same run. Warm: the same clients again on the now warm cache;
// warm-of-limit is their aggregate throughput over that of the same clients pulling the
// same blob files from the same disk through net/http's FileServer. image-MiB is the
// image's size in this run. peak-* are sampled
// every 100 ms during the cold and warm storms and are the whole test process's
// (upstream, proxy and clients: runtime.MemStats HeapInuse and Sys, NumGoroutine).
func BenchmarkStorm(b *testing.B) {
	mb := stormEnvInts(b, stormMBEnv, []int{256})[0]
	counts := stormEnvInts(b, stormClientsEnv, []int{1, 10, 50, 200})
	if !slices.Contains(counts, 1) {
		counts = append(counts, 1) // the baseline
	}
	slices.Sort(counts)
	counts = slices.Compact(counts)

	up := startUpstream(b)
	img := pushImage(b, up.URL, testRepo, "storm", stormLayers, mb<<20/stormLayers)
	b.Logf("image: %d bytes, %d blobs", img.bytes, len(img.blobs))

	for _, kind := range []string{"quartet", "distribution"} {
		var baseline time.Duration // the 1-client cold pull, run first
		for _, n := range counts {
			b.Run(fmt.Sprintf("%s/clients=%d", kind, n), func(b *testing.B) {
				var r stormResult
				for range b.N {
					r.add(runStorm(b, kind, up, img, n))
				}
				r.div(float64(b.N))
				if n == 1 {
					baseline = r.cold
				}
				b.ReportMetric(float64(img.bytes)/(1<<20), "image-MiB") // the scale this run used
				b.ReportMetric(r.upstreamBytes/float64(img.bytes), "upstream-bytes/image")
				b.ReportMetric(r.cold.Seconds(), "cold-s")
				b.ReportMetric(float64(r.cold)/float64(baseline), "cold-vs-1-client")
				b.ReportMetric(r.warmBps/1e6, "warm-MB/s")
				b.ReportMetric(r.limitBps/1e6, "limit-MB/s")
				b.ReportMetric(r.warmBps/r.limitBps, "warm-of-limit")
				b.ReportMetric(r.peak.heapInuse/(1<<20), "peak-heap-inuse-MiB")
				b.ReportMetric(r.peak.sys/(1<<20), "peak-sys-MiB")
				b.ReportMetric(r.peak.goroutines, "peak-goroutines")
			})
		}
	}
}

type peaks struct{ heapInuse, sys, goroutines float64 }

type stormResult struct {
	upstreamBytes     float64
	cold              time.Duration
	warmBps, limitBps float64
	peak              peaks
}

func (r *stormResult) add(o stormResult) {
	r.upstreamBytes += o.upstreamBytes
	r.cold += o.cold
	r.warmBps += o.warmBps
	r.limitBps += o.limitBps
	r.peak.heapInuse = max(r.peak.heapInuse, o.peak.heapInuse)
	r.peak.sys = max(r.peak.sys, o.peak.sys)
	r.peak.goroutines = max(r.peak.goroutines, o.peak.goroutines)
}

func (r *stormResult) div(n float64) {
	r.upstreamBytes /= n
	r.cold = time.Duration(float64(r.cold) / n)
	r.warmBps /= n
	r.limitBps /= n
}

// runStorm starts an empty proxy of the kind, then runs the cold storm, the warm storm and
// the file server's storm with n clients; everything it started is stopped when it returns.
func runStorm(b *testing.B, kind string, up *upstream, img image, n int) stormResult {
	b.Helper()
	b.StopTimer()
	defer b.StartTimer()
	root, err := os.MkdirTemp("", "quartet-storm-")
	require.NoError(b, err)
	defer os.RemoveAll(root)

	var proxyURL string
	switch kind {
	case "quartet":
		m := startMirror(b, up.URL, retention.NewFakeClock(start), mirrorOptions{root: root, retention: time.Hour})
		defer m.Close()
		proxyURL = m.URL
	case "distribution":
		ttl := time.Duration(0) // no scheduler: nothing left running after the storm
		cfg := &configuration.Configuration{
			Version: configuration.CurrentVersion,
			Storage: configuration.Storage{"filesystem": configuration.Parameters{"rootdirectory": root}},
			Proxy: configuration.Proxy{RemoteURL: up.URL, TTL: &ttl,
				Exec: &configuration.ExecConfig{Command: "/nonexistent/credential-helper"}},
		}
		cfg.Log.AccessLog.Disabled = true
		app, err := newApp(context.Background(), cfg)
		require.NoError(b, err)
		s := httptest.NewServer(app)
		defer s.Close()
		proxyURL = s.URL
	default:
		b.Fatalf("unknown proxy %q", kind)
	}

	var r stormResult
	runtime.GC()
	before := up.servedBytes.Load()
	b.StartTimer()
	var cold, warm time.Duration
	r.peak = sampled(func() {
		cold = storm(b, proxyURL, img, n)
		r.upstreamBytes = float64(up.servedBytes.Load() - before)
		warm = storm(b, proxyURL, img, n)
	})
	b.StopTimer()
	r.cold = cold
	r.warmBps = float64(n) * float64(img.bytes) / warm.Seconds()

	// The limit: the same blob files, the same disk, the same clients, a plain file server.
	blobs := filepath.Join(root, "docker", "registry", "v2", "blobs")
	files := httptest.NewServer(blobFiles(blobs, img))
	defer files.Close()
	r.limitBps = float64(n) * float64(img.bytes) / storm(b, files.URL, img, n).Seconds()
	return r
}

// blobFiles serves the image's manifest (by its tag) and blobs from distribution's blob
// files under dir with http.FileServer.
func blobFiles(dir string, img image) http.Handler {
	fs := http.FileServer(http.Dir(dir))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var d digest.Digest
		if _, ref, ok := strings.Cut(r.URL.Path, "/manifests/"); ok && ref == img.tag {
			d = img.manifest
		} else if _, ref, ok := strings.Cut(r.URL.Path, "/blobs/"); ok {
			d = digest.Digest(ref)
		}
		if d.Validate() != nil {
			http.NotFound(w, r)
			return
		}
		r2 := r.Clone(r.Context())
		r2.URL.Path = "/" + d.Algorithm().String() + "/" + d.Encoded()[:2] + "/" + d.Encoded() + "/data"
		fs.ServeHTTP(w, r2)
	})
}

// storm starts n clients together, each pulling img whole from registryURL, and returns
// the time until the last one has it; any client's failure fails the benchmark.
func storm(b *testing.B, registryURL string, img image, n int) time.Duration {
	b.Helper()
	tr := &http.Transport{MaxIdleConnsPerHost: n, DisableCompression: true}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()

	var (
		ready, done sync.WaitGroup
		barrier     = make(chan struct{})
		errs        = make([]error, n)
	)
	ready.Add(n)
	done.Add(n)
	for i := range n {
		go func() {
			defer done.Done()
			ready.Done()
			<-barrier
			errs[i] = pullStreaming(ctx, c, registryURL, img)
		}()
	}
	ready.Wait()
	t0 := time.Now()
	close(barrier)
	done.Wait()
	elapsed := time.Since(t0)
	for i, err := range errs {
		require.NoError(b, err, "client %d of %d from %s", i, n, registryURL)
	}
	return elapsed
}

// pullStreaming pulls img as a container runtime does -- the manifest by tag, then the
// config and every layer -- hashing the bodies as they stream, and checks every digest.
func pullStreaming(ctx context.Context, c *http.Client, registryURL string, img image) error {
	get := func(path string, want digest.Digest) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, registryURL+"/v2/"+img.repo+path, nil)
		if err != nil {
			return err
		}
		req.Header.Set("Accept", ociManifest)
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
			return fmt.Errorf("%s: %d %s", path, resp.StatusCode, body)
		}
		v := want.Verifier()
		if _, err := io.Copy(v, resp.Body); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if !v.Verified() {
			return fmt.Errorf("%s: the body is not %s", path, want)
		}
		return nil
	}
	if err := get("/manifests/"+img.tag, img.manifest); err != nil {
		return err
	}
	for _, d := range img.blobs {
		if err := get("/blobs/"+d.String(), d); err != nil {
			return err
		}
	}
	return nil
}

// sampled runs f, sampling the process's heap in use, memory from the OS and goroutines
// every 100 ms meanwhile (and once at the end), and returns their peaks.
func sampled(f func()) peaks {
	var (
		p    peaks
		mu   sync.Mutex
		stop = make(chan struct{})
		wg   sync.WaitGroup
	)
	sample := func() {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		g := runtime.NumGoroutine()
		mu.Lock()
		p.heapInuse = max(p.heapInuse, float64(ms.HeapInuse))
		p.sys = max(p.sys, float64(ms.Sys))
		p.goroutines = max(p.goroutines, float64(g))
		mu.Unlock()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				sample()
			}
		}
	}()
	f()
	sample()
	close(stop)
	wg.Wait()
	return p
}

// stormEnvInts reads a comma-separated list of positive integers from the environment.
func stormEnvInts(b *testing.B, name string, def []int) []int {
	b.Helper()
	v := strings.TrimSpace(os.Getenv(name))
	if v == "" {
		return def
	}
	var out []int
	for _, f := range strings.Split(v, ",") {
		i, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || i <= 0 {
			b.Fatalf("%s=%q: want positive integers, comma-separated", name, v)
		}
		out = append(out, i)
	}
	return out
}
