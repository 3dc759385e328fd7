package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distribution/distribution/v3/configuration"
	"github.com/distribution/distribution/v3/registry/storage/driver/filesystem"
	"github.com/opencontainers/go-digest"
	v1 "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quartet-operator/quartet/cmd/mirror-registry/internal/coalesce"
	"github.com/quartet-operator/quartet/cmd/mirror-registry/internal/retention"
)

// These tests run everything in this process on 127.0.0.1: an upstream registry
// (distribution in normal mode), and mirror-registry in front of it with a fake clock.
// Time passes only when a test moves the clock, and eviction runs only when a test calls
// Evict, so nothing depends on how fast the machine is.

const (
	ociManifest = "application/vnd.oci.image.manifest.v1+json"
	ociConfig   = "application/vnd.oci.image.config.v1+json"
	ociLayer    = "application/vnd.oci.image.layer.v1.tar+gzip"
	testRepo    = "library/app"
)

var start = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func at(seconds int) time.Time { return start.Add(time.Duration(seconds) * time.Second) }

func TestMain(m *testing.M) {
	logrus.SetLevel(logrus.WarnLevel)
	os.Exit(m.Run())
}

// upstream is a plain distribution registry that counts the blobs it serves. A test may
// serve some blob GETs itself (intercept returns true when it did).
type upstream struct {
	*httptest.Server
	blobGets  atomic.Int64
	intercept atomic.Pointer[func(w http.ResponseWriter, r *http.Request, d digest.Digest) bool]

	// manifestDelay holds every manifest GET that long before it is served.
	manifestDelay atomic.Int64

	// servedBytes counts the response body bytes the upstream wrote, every request.
	servedBytes atomic.Int64

	mu             sync.Mutex
	getsByBlob     map[digest.Digest]int
	getsByManifest map[string]int // by tag or digest, as asked
}

// manifestGets returns how many GETs of the manifest ref (a tag or a digest) the upstream received.
func (u *upstream) manifestGets(ref string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.getsByManifest[ref]
}

// gets returns how many GETs of d the upstream received.
func (u *upstream) gets(d digest.Digest) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.getsByBlob[d]
}

func startUpstream(t testing.TB) *upstream {
	t.Helper()
	cfg := &configuration.Configuration{
		Version: configuration.CurrentVersion,
		Storage: configuration.Storage{"filesystem": configuration.Parameters{"rootdirectory": t.TempDir()}},
	}
	cfg.HTTP.Secret = "upstream-test-secret"
	cfg.Log.AccessLog.Disabled = true
	app, err := newApp(context.Background(), cfg)
	require.NoError(t, err)
	u := &upstream{getsByBlob: map[digest.Digest]int{}, getsByManifest: map[string]int{}}
	u.Server = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w := &countingWriter{ResponseWriter: rw, n: &u.servedBytes}
		if _, d, ok := strings.Cut(r.URL.Path, "/blobs/"); ok && r.Method == http.MethodGet && strings.HasPrefix(d, "sha256:") {
			u.blobGets.Add(1)
			u.mu.Lock()
			u.getsByBlob[digest.Digest(d)]++
			u.mu.Unlock()
			if f := u.intercept.Load(); f != nil && (*f)(w, r, digest.Digest(d)) {
				return
			}
		}
		if _, ref, ok := strings.Cut(r.URL.Path, "/manifests/"); ok && r.Method == http.MethodGet {
			u.mu.Lock()
			u.getsByManifest[ref]++
			u.mu.Unlock()
			time.Sleep(time.Duration(u.manifestDelay.Load()))
		}
		app.ServeHTTP(w, r)
	}))
	t.Cleanup(u.Close)
	return u
}

// countingWriter adds the body bytes written to n; Unwrap lets http.ResponseController flush.
type countingWriter struct {
	http.ResponseWriter
	n *atomic.Int64
}

func (w *countingWriter) Write(p []byte) (int, error) {
	n, err := w.ResponseWriter.Write(p)
	w.n.Add(int64(n))
	return n, err
}

func (w *countingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// image is what pushImage put upstream.
type image struct {
	repo, tag string
	manifest  digest.Digest
	blobs     []digest.Digest // config, then layers
	bytes     int64           // manifest, config and layers
}

func (i image) digests() []digest.Digest { return append([]digest.Digest{i.manifest}, i.blobs...) }

// pushImage uploads a config, layers of layerSize bytes and an OCI manifest by plain HTTP.
func pushImage(t testing.TB, registryURL, repo, tag string, layers, layerSize int) image {
	t.Helper()
	img := image{repo: repo, tag: tag}
	config := []byte(fmt.Sprintf(`{"architecture":"amd64","os":"linux","config":{"Labels":{"image":%q}}}`, repo+":"+tag))
	type desc struct {
		MediaType string        `json:"mediaType"`
		Digest    digest.Digest `json:"digest"`
		Size      int           `json:"size"`
	}
	m := struct {
		SchemaVersion int    `json:"schemaVersion"`
		MediaType     string `json:"mediaType"`
		Config        desc   `json:"config"`
		Layers        []desc `json:"layers"`
	}{SchemaVersion: 2, MediaType: ociManifest}
	m.Config = desc{ociConfig, uploadBlob(t, registryURL, repo, config), len(config)}
	img.blobs = append(img.blobs, m.Config.Digest)
	img.bytes += int64(len(config))
	for i := range layers {
		layer := bytes.Repeat([]byte(fmt.Sprintf("%s:%s layer %d|", repo, tag, i)), layerSize/20+1)[:layerSize]
		d := uploadBlob(t, registryURL, repo, layer)
		m.Layers = append(m.Layers, desc{ociLayer, d, len(layer)})
		img.blobs = append(img.blobs, d)
		img.bytes += int64(len(layer))
	}
	body, err := json.Marshal(m)
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPut, registryURL+"/v2/"+repo+"/manifests/"+tag, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", ociManifest)
	resp := do(t, req)
	require.Equal(t, http.StatusCreated, resp.StatusCode, "pushing the manifest: %s", resp.body)
	img.manifest = digest.FromBytes(body)
	img.bytes += int64(len(body))
	return img
}

func uploadBlob(t testing.TB, registryURL, repo string, content []byte) digest.Digest {
	t.Helper()
	resp := do(t, mustRequest(t, http.MethodPost, registryURL+"/v2/"+repo+"/blobs/uploads/", nil))
	require.Equal(t, http.StatusAccepted, resp.StatusCode, "starting an upload: %s", resp.body)
	base, err := url.Parse(registryURL)
	require.NoError(t, err)
	loc, err := base.Parse(resp.header.Get("Location"))
	require.NoError(t, err)
	d := digest.FromBytes(content)
	q := loc.Query()
	q.Set("digest", d.String())
	loc.RawQuery = q.Encode()
	put := mustRequest(t, http.MethodPut, loc.String(), content)
	put.Header.Set("Content-Type", "application/octet-stream")
	resp = do(t, put)
	require.Equal(t, http.StatusCreated, resp.StatusCode, "finishing an upload: %s", resp.body)
	return d
}

type response struct {
	StatusCode int
	header     http.Header
	body       []byte
}

var client = &http.Client{Timeout: 30 * time.Second}

func mustRequest(t testing.TB, method, u string, body []byte) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, u, bytes.NewReader(body))
	require.NoError(t, err)
	return req
}

func do(t testing.TB, req *http.Request) response {
	t.Helper()
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return response{StatusCode: resp.StatusCode, header: resp.Header, body: body}
}

// pull pulls img by tag as a container runtime does (manifest, then config and layers)
// and checks every digest; it returns the first failure.
func pull(t *testing.T, registryURL string, img image) error {
	t.Helper()
	req := mustRequest(t, http.MethodGet, registryURL+"/v2/"+img.repo+"/manifests/"+img.tag, nil)
	req.Header.Set("Accept", ociManifest)
	resp := do(t, req)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("manifest %s:%s: %d %s", img.repo, img.tag, resp.StatusCode, resp.body)
	}
	if got := digest.FromBytes(resp.body); got != img.manifest {
		return fmt.Errorf("manifest %s:%s is %s, want %s", img.repo, img.tag, got, img.manifest)
	}
	for _, d := range img.blobs {
		resp := do(t, mustRequest(t, http.MethodGet, registryURL+"/v2/"+img.repo+"/blobs/"+d.String(), nil))
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("blob %s: %d %s", d, resp.StatusCode, resp.body)
		}
		if got := digest.FromBytes(resp.body); got != d {
			return fmt.Errorf("blob %s came back as %s", d, got)
		}
	}
	return nil
}

// mirror is mirror-registry in proxy mode, assembled as run assembles it.
type mirror struct {
	*httptest.Server
	keeper    *retention.Keeper
	warmer    *retention.Warmer
	coalescer *coalesce.Coalescer
	root      string
}

type mirrorOptions struct {
	root           string
	retention      time.Duration
	maxDiskPercent float64
	pinnedFile     string
	diskMinAge     time.Duration
	diskUsage      func() (retention.DiskUsage, error)
	stallTimeout   time.Duration
}

func startMirror(t testing.TB, upstreamURL string, clock retention.Clock, o mirrorOptions) *mirror {
	t.Helper()
	if o.root == "" {
		o.root = t.TempDir()
	}
	cfg := &configuration.Configuration{
		Version: configuration.CurrentVersion,
		Storage: configuration.Storage{"filesystem": configuration.Parameters{"rootdirectory": o.root}},
		// As the operator renders it. Credentials come from a helper run only when the
		// upstream asks for them (never, here); without proxy.exec, distribution asks the
		// upstream at start (proxyauth.go, getAuthURLs) and a restart during an outage fails.
		Proxy: configuration.Proxy{RemoteURL: upstreamURL, Exec: &configuration.ExecConfig{Command: "/nonexistent/credential-helper"}},
	}
	cfg.Log.AccessLog.Disabled = true
	driver, err := filesystem.FromParameters(cfg.Storage.Parameters())
	require.NoError(t, err)
	keeper, err := retention.New(context.Background(), driver, retention.Options{
		Retention:          o.retention,
		MaxDiskPercent:     o.maxDiskPercent,
		DiskEvictionMinAge: o.diskMinAge,
		PinnedFile:         o.pinnedFile,
		StateFile:          defaultStateFile(o.root),
		Clock:              clock,
		DiskUsage:          o.diskUsage,
	})
	require.NoError(t, err)
	coalescer, err := coalesce.New(context.Background(), coalesce.Options{Driver: driver,
		TempDir: defaultCoalesceDir(o.root), StallTimeout: o.stallTimeout})
	require.NoError(t, err)
	_, err = prepareConfig(cfg, keeper.Records(), coalescer)
	require.NoError(t, err)
	app, err := newApp(context.Background(), cfg)
	require.NoError(t, err)
	require.NoError(t, keeper.Restore(context.Background()))
	warmer := &retention.Warmer{Client: client, Platforms: []v1.Platform{{OS: "linux", Architecture: "amd64"}},
		Keeper: keeper, Clock: clock, Log: logrus.StandardLogger()}
	m := &mirror{Server: httptest.NewServer(newHandler(app, cfg, cacheHandler(warmer, keeper, coalescer))), keeper: keeper, warmer: warmer,
		coalescer: coalescer, root: o.root}
	warmer.BaseURL = m.URL
	t.Cleanup(m.Close)
	return m
}

func (m *mirror) evict(t *testing.T) retention.Result {
	t.Helper()
	res, err := m.keeper.Evict(context.Background())
	require.NoError(t, err)
	return res
}

// stored says which of the digests have data in the mirror's storage.
func (m *mirror) stored(ds []digest.Digest) map[digest.Digest]bool {
	out := map[digest.Digest]bool{}
	for _, d := range ds {
		p := filepath.Join(m.root, "docker/registry/v2/blobs", d.Algorithm().String(), d.Encoded()[:2], d.Encoded(), "data")
		_, err := os.Stat(p)
		out[d] = err == nil
	}
	return out
}

func allTrue(ds []digest.Digest, v bool) map[digest.Digest]bool {
	out := map[digest.Digest]bool{}
	for _, d := range ds {
		out[d] = v
	}
	return out
}

func evictedDigests(res retention.Result) map[digest.Digest]retention.Reason {
	out := map[digest.Digest]retention.Reason{}
	for _, e := range res.Evicted {
		out[e.Digest] = e.Reason
	}
	return out
}

func reasons(ds []digest.Digest, r retention.Reason) map[digest.Digest]retention.Reason {
	out := map[digest.Digest]retention.Reason{}
	for _, d := range ds {
		out[d] = r
	}
	return out
}

// The scenario of issue 22, which distribution's proxy.ttl fails: pulled at 0 and 25 s, the
// upstream gone at 25 s, still served at 55 s — after the first fetch + retention (40 s),
// when distribution has deleted it — and deleted only once a retention passed with no pull.
func TestMirrorKeepsContentUsedWithinRetention(t *testing.T) {
	up := startUpstream(t)
	img := pushImage(t, up.URL, testRepo, "v1", 2, 2048)
	clock := retention.NewFakeClock(at(0))
	m := startMirror(t, up.URL, clock, mirrorOptions{retention: 40 * time.Second})

	require.NoError(t, pull(t, m.URL, img), "first pull, through to the upstream")
	fetched := up.blobGets.Load()
	require.EqualValues(t, len(img.blobs), fetched)

	clock.Set(at(25))
	require.NoError(t, pull(t, m.URL, img), "second pull")
	assert.Equal(t, fetched, up.blobGets.Load(), "the second pull is served from the cache")
	up.Close()

	clock.Set(at(55))
	assert.Empty(t, m.evict(t).Evicted, "used 30 s ago: kept, though first fetched 55 s ago")
	assert.Equal(t, allTrue(img.digests(), true), m.stored(img.digests()))
	require.NoError(t, pull(t, m.URL, img), "served from the cache with the upstream down")

	clock.Set(at(94))
	assert.Empty(t, m.evict(t).Evicted, "39 s since the pull at 55 s")

	clock.Set(at(96))
	res := m.evict(t)
	assert.Equal(t, reasons(img.digests(), retention.ReasonNotUsedWithinRetention), evictedDigests(res))
	assert.Equal(t, img.manifest, res.Evicted[0].Digest, "the manifest goes before its content")
	assert.Equal(t, allTrue(img.digests(), false), m.stored(img.digests()))
	assert.Error(t, pull(t, m.URL, img), "gone from the cache, and the upstream is down")
}

// The same without the pull at 55 s: evicted at 70 s, 45 s after its last use.
func TestMirrorEvictsContentNotUsedWithinRetention(t *testing.T) {
	up := startUpstream(t)
	img := pushImage(t, up.URL, testRepo, "v1", 2, 2048)
	clock := retention.NewFakeClock(at(0))
	m := startMirror(t, up.URL, clock, mirrorOptions{retention: 40 * time.Second})

	require.NoError(t, pull(t, m.URL, img))
	clock.Set(at(25))
	require.NoError(t, pull(t, m.URL, img))
	up.Close()

	clock.Set(at(55))
	assert.Empty(t, m.evict(t).Evicted)
	assert.Equal(t, allTrue(img.digests(), true), m.stored(img.digests()))

	clock.Set(at(70))
	res := m.evict(t)
	assert.Equal(t, reasons(img.digests(), retention.ReasonNotUsedWithinRetention), evictedDigests(res))
	for _, e := range res.Evicted {
		assert.Equal(t, at(25), e.LastUse)
	}
	assert.Equal(t, allTrue(img.digests(), false), m.stored(img.digests()))
	assert.Error(t, pull(t, m.URL, img))
}

func TestMirrorKeepsPinnedContent(t *testing.T) {
	up := startUpstream(t)
	pinned := pushImage(t, up.URL, testRepo, "pinned", 2, 1024)
	other := pushImage(t, up.URL, "library/other", "v1", 1, 1024)
	pinnedFile := filepath.Join(t.TempDir(), "pinned-digests")
	// As a pod's status.containerStatuses[].imageID names it.
	require.NoError(t, os.WriteFile(pinnedFile, []byte("docker.io/"+pinned.repo+"@"+pinned.manifest.String()+"\n"), 0o644))
	clock := retention.NewFakeClock(at(0))
	m := startMirror(t, up.URL, clock, mirrorOptions{retention: 40 * time.Second, pinnedFile: pinnedFile})

	require.NoError(t, pull(t, m.URL, pinned))
	require.NoError(t, pull(t, m.URL, other))
	up.Close()

	clock.Set(at(100))
	res := m.evict(t)
	assert.Equal(t, reasons(other.digests(), retention.ReasonNotUsedWithinRetention), evictedDigests(res))
	assert.Equal(t, len(pinned.digests()), res.Decision.Pinned, "the manifest, its config and its layers")
	require.NoError(t, pull(t, m.URL, pinned), "pinned: served long after the retention")

	clock.Set(at(1000))
	assert.Empty(t, m.evict(t).Evicted)

	// The pod is gone: the operator rewrites the file without the digest.
	next := pinnedFile + ".new"
	require.NoError(t, os.WriteFile(next, []byte("# no pods\n"), 0o644))
	require.NoError(t, os.Rename(next, pinnedFile))
	// A pin is a use: the image was in use until this pass saw the pin gone, so it stays
	// one retention from the pass before, however long ago it was pulled.
	res = m.evict(t)
	assert.Empty(t, res.Evicted, "in use until the pass at 1000 s")
	clock.Set(at(1040))
	assert.Empty(t, m.evict(t).Evicted, "one retention after its last pinned pass")
	clock.Set(at(1041))
	res = m.evict(t)
	assert.Equal(t, reasons(pinned.digests(), retention.ReasonNotUsedWithinRetention), evictedDigests(res))
	assert.Error(t, pull(t, m.URL, pinned))
}

// blobBytes is the fake disk's usage: the bytes of blob data in the mirror's storage.
func blobBytes(t *testing.T, root string) uint64 {
	t.Helper()
	var total uint64
	err := filepath.WalkDir(filepath.Join(root, "docker/registry/v2/blobs"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && d.Name() == "data" {
			fi, err := d.Info()
			if err != nil {
				return err
			}
			total += uint64(fi.Size())
		}
		return nil
	})
	require.NoError(t, err)
	return total
}

func TestMirrorEvictsLeastRecentlyUsedAboveDiskThreshold(t *testing.T) {
	up := startUpstream(t)
	old := pushImage(t, up.URL, "library/old", "v1", 2, 4096)
	older := pushImage(t, up.URL, "library/older", "v1", 2, 4096)
	recent := pushImage(t, up.URL, "library/recent", "v1", 2, 4096)
	pinned := pushImage(t, up.URL, "library/pinned", "v1", 2, 4096)
	pinnedFile := filepath.Join(t.TempDir(), "pinned-digests")
	require.NoError(t, os.WriteFile(pinnedFile, []byte(pinned.manifest.String()+"\n"), 0o644))

	root := t.TempDir()
	var capacity atomic.Uint64
	clock := retention.NewFakeClock(at(0))
	m := startMirror(t, up.URL, clock, mirrorOptions{
		root: root, retention: time.Hour, maxDiskPercent: 85, pinnedFile: pinnedFile,
		diskUsage: func() (retention.DiskUsage, error) {
			return retention.DiskUsage{UsedBytes: blobBytes(t, root), CapacityBytes: capacity.Load()}, nil
		},
	})
	for i, img := range []image{pinned, older, old, recent} { // pinned is the least recently used
		clock.Set(at(i * 10))
		require.NoError(t, pull(t, m.URL, img))
	}
	up.Close()
	clock.Set(at(60))

	used := blobBytes(t, root)
	require.Equal(t, uint64(pinned.bytes+older.bytes+old.bytes+recent.bytes), used)
	capacity.Store(used * 100 / 85 * 2) // far below the threshold
	assert.Empty(t, m.evict(t).Evicted, "below the threshold nothing goes before the retention")

	// Allowed: 10 bytes more than all but one image (less than any blob), so exactly one
	// unpinned image must go, all of it: the least recently used.
	capacity.Store((used - uint64(older.bytes) + 10) * 100 / 85)
	res := m.evict(t)
	assert.Equal(t, reasons(older.digests(), retention.ReasonDiskAboveThreshold), evictedDigests(res))
	assert.False(t, res.Decision.StillAboveThreshold)
	for _, img := range []image{pinned, old, recent} {
		assert.NoError(t, pull(t, m.URL, img), "%s stays", img.repo)
	}
	assert.Error(t, pull(t, m.URL, older))

	// A disk that fills with what is not the cache: every unpinned image goes, the pinned stays.
	capacity.Store(uint64(pinned.bytes) / 2)
	res = m.evict(t)
	assert.True(t, res.Decision.StillAboveThreshold)
	assert.NoError(t, pull(t, m.URL, pinned))
	assert.Error(t, pull(t, m.URL, old))
	assert.Error(t, pull(t, m.URL, recent))
}

// On a disk filled by what is not the cache, what a node pulled within the minimum age
// stays and is served: evicting it would not bring the disk below the threshold, only
// break the node's next attempt (issue 22's replica test met this on a 91% full host).
func TestMirrorKeepsRecentPullsOnAFullDisk(t *testing.T) {
	up := startUpstream(t)
	old := pushImage(t, up.URL, "library/old", "v1", 1, 4096)
	recent := pushImage(t, up.URL, "library/recent", "v1", 1, 4096)
	clock := retention.NewFakeClock(at(0))
	m := startMirror(t, up.URL, clock, mirrorOptions{retention: time.Hour, maxDiskPercent: 85, diskMinAge: time.Minute,
		diskUsage: func() (retention.DiskUsage, error) {
			return retention.DiskUsage{UsedBytes: 91 << 30, CapacityBytes: 100 << 30}, nil
		}})
	require.NoError(t, pull(t, m.URL, old))
	clock.Set(at(100))
	require.NoError(t, pull(t, m.URL, recent))
	up.Close()

	clock.Set(at(160))
	res := m.evict(t)
	assert.Equal(t, reasons(old.digests(), retention.ReasonDiskAboveThreshold), evictedDigests(res))
	assert.True(t, res.Decision.StillAboveThreshold)
	assert.NoError(t, pull(t, m.URL, recent), "pulled 60 s ago: within the minimum age")
	assert.Error(t, pull(t, m.URL, old))

	clock.Set(at(221)) // the pull at 160 was a use
	assert.Equal(t, reasons(recent.digests(), retention.ReasonDiskAboveThreshold), evictedDigests(m.evict(t)))
}

// A restart keeps the last uses; content on disk that the state file does not know — a
// cache written by plain distribution before the upgrade — counts as used at start.
func TestMirrorRestartKeepsLastUses(t *testing.T) {
	up := startUpstream(t)
	known := pushImage(t, up.URL, "library/known", "v1", 1, 1024)
	upgraded := pushImage(t, up.URL, "library/upgraded", "v1", 1, 1024)
	root := t.TempDir()
	clock := retention.NewFakeClock(at(0))

	first := startMirror(t, up.URL, clock, mirrorOptions{root: root, retention: 40 * time.Second})
	require.NoError(t, pull(t, first.URL, known))
	clock.Set(at(30))
	require.NoError(t, pull(t, first.URL, known))
	require.NoError(t, first.keeper.Save())
	first.Close()

	// Plain distribution in proxy mode adds content the state file never saw.
	plainCfg := &configuration.Configuration{
		Version: configuration.CurrentVersion,
		Storage: configuration.Storage{"filesystem": configuration.Parameters{"rootdirectory": root}},
		Proxy:   configuration.Proxy{RemoteURL: up.URL, TTL: new(time.Duration)},
	}
	plainCfg.Log.AccessLog.Disabled = true
	plainApp, err := newApp(context.Background(), plainCfg)
	require.NoError(t, err)
	plain := httptest.NewServer(plainApp)
	require.NoError(t, pull(t, plain.URL, upgraded))
	plain.Close()
	up.Close()

	clock.Set(at(50))
	second := startMirror(t, up.URL, clock, mirrorOptions{root: root, retention: 40 * time.Second})
	clock.Set(at(75))
	res := second.evict(t)
	assert.Equal(t, reasons(known.digests(), retention.ReasonNotUsedWithinRetention), evictedDigests(res),
		"last used at 30 s before the restart: expired at 75 s")
	assert.NoError(t, pull(t, second.URL, upgraded), "unknown to the state file: kept a retention from the start at 50 s")

	require.NoError(t, second.keeper.Save())
	saved, err := os.ReadFile(defaultStateFile(root))
	require.NoError(t, err)
	assert.Contains(t, string(saved), upgraded.manifest.String()+" "+fmt.Sprint(at(75).Unix()))
	assert.NotContains(t, string(saved), known.manifest.String())
}

// TestMirrorCountsHitsAndMisses (issue 22, part 4): the first pull of an image fetches
// every blob from the upstream (misses, their bytes from the upstream); once stored, the
// next pull is served from the cache (hits, the same bytes from the cache), and the
// upstream serves no blob again. GET /quartet/cache reports the counts.
func TestMirrorCountsHitsAndMisses(t *testing.T) {
	up := startUpstream(t)
	img := pushImage(t, up.URL, testRepo, "v1", 2, 4096)
	m := startMirror(t, up.URL, retention.NewFakeClock(at(0)), mirrorOptions{retention: time.Hour})
	var blobBytes uint64
	for _, d := range img.blobs {
		b := do(t, mustRequest(t, http.MethodGet, up.URL+"/v2/"+img.repo+"/blobs/"+d.String(), nil)).body
		blobBytes += uint64(len(b))
	}
	upstreamGets := up.blobGets.Load()

	assert.Equal(t, retention.TrafficReport{}, m.report(t).TrafficReport, "nothing served yet")

	require.NoError(t, pull(t, m.URL, img))
	n := uint64(len(img.blobs))
	assert.Equal(t, retention.TrafficReport{BlobMisses: n, BytesFromUpstream: blobBytes}, m.report(t).TrafficReport)
	require.Eventually(t, func() bool {
		return assert.ObjectsAreEqual(allTrue(img.blobs, true), m.stored(img.blobs))
	}, 10*time.Second, 20*time.Millisecond, "the proxy stored the blobs")

	gets := up.blobGets.Load()
	require.NoError(t, pull(t, m.URL, img))
	assert.Equal(t, retention.TrafficReport{BlobHits: n, BlobMisses: n, BytesFromCache: blobBytes, BytesFromUpstream: blobBytes}, m.report(t).TrafficReport)
	assert.Equal(t, gets, up.blobGets.Load(), "the second pull fetched no blob from the upstream")
	assert.Equal(t, upstreamGets+int64(n), gets, "the first pull fetched each blob from the upstream once")
	assert.Equal(t, coalesce.Stats{UpstreamFetches: n, UpstreamFetchedBytes: blobBytes}, m.report(t).Stats,
		"one fetch per blob, none shared (the pulls were one after the other)")
}

// report is the mirror's GET /quartet/cache.
func (m *mirror) report(t testing.TB) cacheReport {
	t.Helper()
	resp := do(t, mustRequest(t, http.MethodGet, m.URL+cachePath, nil))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var rep cacheReport
	require.NoError(t, json.Unmarshal(resp.body, &rep))
	return rep
}
