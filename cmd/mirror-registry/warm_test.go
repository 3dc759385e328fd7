package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	v1 "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quartet-operator/quartet/cmd/mirror-registry/internal/coalesce"
	"github.com/quartet-operator/quartet/cmd/mirror-registry/internal/retention"
)

// pushIndex uploads an OCI index of the images, the i-th for platforms[i].
func pushIndex(t *testing.T, registryURL, repo, tag string, images []image, platforms []v1.Platform) digest.Digest {
	t.Helper()
	idx := v1.Index{MediaType: v1.MediaTypeImageIndex}
	idx.SchemaVersion = 2
	for i, img := range images {
		get := mustRequest(t, http.MethodGet, registryURL+"/v2/"+repo+"/manifests/"+img.manifest.String(), nil)
		get.Header.Set("Accept", ociManifest)
		resp := do(t, get)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		idx.Manifests = append(idx.Manifests, v1.Descriptor{MediaType: v1.MediaTypeImageManifest, Digest: img.manifest,
			Size: int64(len(resp.body)), Platform: &platforms[i]})
	}
	body, err := json.Marshal(idx)
	require.NoError(t, err)
	req := mustRequest(t, http.MethodPut, registryURL+"/v2/"+repo+"/manifests/"+tag, body)
	req.Header.Set("Content-Type", v1.MediaTypeImageIndex)
	resp := do(t, req)
	require.Equal(t, http.StatusCreated, resp.StatusCode, "pushing the index: %s", resp.body)
	return digest.FromBytes(body)
}

func byDigest(img image) image {
	img.tag = img.manifest.String()
	return img
}

// Issue 22, part 2: an image that nodes pulled straight from the upstream before the
// mirror existed is pinned by the operator (a running pod's imageID); the warmer fetches
// it — the index, the nodes' platform only — so it is served after the upstream fails.
func TestMirrorWarmsPinnedImagesNeverPulledThroughIt(t *testing.T) {
	up := startUpstream(t)
	amd := pushImage(t, up.URL, testRepo, "amd64", 2, 1024)
	arm := pushImage(t, up.URL, testRepo, "arm64", 2, 1024)
	index := pushIndex(t, up.URL, testRepo, "v1", []image{amd, arm},
		[]v1.Platform{{OS: "linux", Architecture: "amd64"}, {OS: "linux", Architecture: "arm64", Variant: "v8"}})
	single := pushImage(t, up.URL, "library/tool", "v2", 1, 512)
	up.blobGets.Store(0)

	missing := digest.FromString("not upstream")
	pinnedFile := filepath.Join(t.TempDir(), "pinned-images")
	require.NoError(t, os.WriteFile(pinnedFile, []byte("# written by the operator\n"+
		"docker.io/"+testRepo+"@"+index.String()+"\n"+ // a pod's imageID, with the host
		"tool:v2@"+single.manifest.String()+"\n"+ // normalised as docker.io/library/tool, with the pod's tag
		testRepo+"@"+missing.String()+"\n"+
		single.blobs[0].String()+"\n"), 0o644)) // a bare digest: never fetched
	clock := retention.NewFakeClock(at(0))
	m := startMirror(t, up.URL, clock, mirrorOptions{retention: 40 * time.Second, pinnedFile: pinnedFile,
		diskUsage: func() (retention.DiskUsage, error) {
			return retention.DiskUsage{UsedBytes: 600 << 20, CapacityBytes: 1 << 30}, nil
		}})

	status, err := m.warmer.Warm(t.Context())
	require.NoError(t, err)
	assert.Equal(t, 4, status.Pinned)
	assert.Equal(t, 3, status.Cached, "the index for linux/amd64, the tool image, and the bare digest (the tool's config, now cached)")
	require.Len(t, status.Missing, 1)
	assert.Equal(t, testRepo+"@"+missing.String(), status.Missing[0].Image)
	assert.Contains(t, status.Missing[0].Error, "manifest unknown", "the proxy answers 500 for a manifest the upstream does not have")
	assert.EqualValues(t, len(amd.blobs)+len(single.blobs), up.blobGets.Load(), "amd64's blobs and the tool's; not arm64's")
	assert.Equal(t, allTrue(arm.blobs, false), m.stored(arm.blobs))

	// A second pass finds everything cached and asks the upstream for nothing.
	fetched := up.blobGets.Load()
	status, err = m.warmer.Warm(t.Context())
	require.NoError(t, err)
	assert.Equal(t, 3, status.Cached)
	assert.Equal(t, fetched, up.blobGets.Load())

	// The report the operator reads: the warm pass, and the disk the last eviction pass saw.
	m.evict(t)
	resp := do(t, mustRequest(t, http.MethodGet, m.URL+cachePath, nil))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var served cacheReport
	require.NoError(t, json.Unmarshal(resp.body, &served))
	// The warm passes' blob fetches are upstream fetches (not served traffic: nobody pulled).
	assert.Equal(t, cacheReport{WarmStatus: status, DiskUsedBytes: 600 << 20, DiskCapacityBytes: 1 << 30,
		Stats: coalesce.Stats{UpstreamFetches: uint64(fetched), UpstreamFetchedBytes: served.UpstreamFetchedBytes}}, served)
	assert.NotZero(t, served.UpstreamFetchedBytes)

	// The upstream link fails: both pinned images are served from the cache, by digest
	// and (the index) by tag as a node resolves it. Long after the retention: pinned.
	up.Close()
	clock.Set(at(1000))
	m.evict(t)
	require.NoError(t, pull(t, m.URL, byDigest(amd)))
	require.NoError(t, pull(t, m.URL, byDigest(single)))
	require.NoError(t, pull(t, m.URL, single), "the pod's tag resolves from the cache: pods start by tag during the outage")
	resp = do(t, mustRequest(t, http.MethodGet, m.URL+"/v2/"+testRepo+"/manifests/"+index.String(), nil))
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	resp = do(t, mustRequest(t, http.MethodGet, m.URL+"/v2/"+testRepo+"/manifests/v1", nil))
	assert.NotEqual(t, http.StatusOK, resp.StatusCode, "a pin without a tag caches no tag")
	assert.Error(t, pull(t, m.URL, byDigest(arm)), "another platform's image is not fetched")
}

// Pins whose content is cached and complete are not fetched again; a pin whose layer was
// lost is fetched again whole.
func TestWarmerRefetchesWhatTheCacheLost(t *testing.T) {
	up := startUpstream(t)
	img := pushImage(t, up.URL, testRepo, "v1", 2, 1024)
	pinnedFile := filepath.Join(t.TempDir(), "pinned-images")
	require.NoError(t, os.WriteFile(pinnedFile, []byte(testRepo+"@"+img.manifest.String()+"\n"), 0o644))
	clock := retention.NewFakeClock(at(0))
	m := startMirror(t, up.URL, clock, mirrorOptions{retention: 40 * time.Second, pinnedFile: pinnedFile})
	_, err := m.warmer.Warm(t.Context())
	require.NoError(t, err)
	require.EqualValues(t, len(img.blobs), up.blobGets.Load())

	// Unpinned and expired, then pinned again (a pod of the image comes back).
	require.NoError(t, os.WriteFile(pinnedFile, []byte("\n"), 0o644))
	clock.Set(at(100))
	require.NotEmpty(t, m.evict(t).Evicted)
	require.NoError(t, os.WriteFile(pinnedFile, []byte(testRepo+"@"+img.manifest.String()+"\n\n"), 0o644))
	status, err := m.warmer.Warm(t.Context())
	require.NoError(t, err)
	assert.Equal(t, 1, status.Cached)
	assert.EqualValues(t, 2*len(img.blobs), up.blobGets.Load())
	assert.Equal(t, allTrue(img.digests(), true), m.stored(img.digests()))
}

// Run warms at start, then as soon as the pinned file changes (a new pod's image), without
// waiting for its interval.
func TestWarmerRunFetchesANewPinWithoutWaitingForItsInterval(t *testing.T) {
	up := startUpstream(t)
	first := pushImage(t, up.URL, testRepo, "v1", 1, 512)
	second := pushImage(t, up.URL, "library/second", "v1", 1, 512)
	pinnedFile := filepath.Join(t.TempDir(), "pinned-images")
	require.NoError(t, os.WriteFile(pinnedFile, []byte(testRepo+"@"+first.manifest.String()+"\n"), 0o644))
	m := startMirror(t, up.URL, retention.NewFakeClock(at(0)), mirrorOptions{retention: time.Hour, pinnedFile: pinnedFile})
	m.warmer.CheckEvery = 10 * time.Millisecond
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); m.warmer.Run(ctx, time.Hour) }()
	defer func() { cancel(); <-done }()

	require.Eventually(t, func() bool { return m.warmer.Status().Cached == 1 }, 10*time.Second, 10*time.Millisecond, "the first pass")
	require.NoError(t, os.WriteFile(pinnedFile, []byte(testRepo+"@"+first.manifest.String()+"\nlibrary/second@"+second.manifest.String()+"\n"), 0o644))
	require.Eventually(t, func() bool { return m.warmer.Status().Cached == 2 }, 10*time.Second, 10*time.Millisecond,
		"the new pin is fetched though the interval is an hour")
	assert.Equal(t, allTrue(second.digests(), true), m.stored(second.digests()))
}
