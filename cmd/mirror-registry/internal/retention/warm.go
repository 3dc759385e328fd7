package retention

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/opencontainers/go-digest"
	v1 "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/sirupsen/logrus"
)

// manifestAccept is every manifest type a pull accepts: indexes and image manifests, OCI
// and Docker.
var manifestAccept = strings.Join([]string{
	v1.MediaTypeImageIndex, v1.MediaTypeImageManifest,
	"application/vnd.docker.distribution.manifest.list.v2+json",
	"application/vnd.docker.distribution.manifest.v2+json",
}, ", ")

// maxManifestBytes bounds a manifest read while warming (distribution's own limit is 4 MiB).
const maxManifestBytes = 4 << 20

// maxWarmDepth bounds index nesting (an index of indexes is legal, a loop is not possible
// with digests, a deep chain is a mistake).
const maxWarmDepth = 3

// maxReportedMissing bounds the pins WarmStatus lists as missing.
const maxReportedMissing = 20

// Warmer fetches pinned images the cache does not hold through the registry's own HTTP
// address, exactly as a pull would, so the proxy stores them: images that nodes pulled
// before the mirror existed are cached before the upstream link fails. Of an index it
// fetches the manifests of Platforms only.
//
// Memory: complete, the pins fully cached when this process last looked (a restart only
// makes the next pass look at every pin again), and the last WarmStatus.
type Warmer struct {
	// BaseURL is the registry's own address, "http://127.0.0.1:5000".
	BaseURL   string
	Client    *http.Client
	Platforms []v1.Platform
	Keeper    *Keeper
	Clock     Clock
	Log       logrus.FieldLogger
	// CheckEvery is how often Run looks whether the pinned file changed (0: pinsCheck).
	CheckEvery time.Duration

	mu       sync.Mutex
	complete map[Pin]bool
	status   WarmStatus
	// warmedVersion is the pinned file's version the last pass read.
	warmedVersion uint64
}

// WarmStatus is what the last warm pass found (served in GET /quartet/cache).
type WarmStatus struct {
	// Pinned is the number of pinned images (lines of the pinned file).
	Pinned int `json:"pinned"`
	// Cached is how many of them the cache holds whole: manifest, the manifests of the
	// warmed platforms, their configs and layers.
	Cached int `json:"cached"`
	// Missing are pinned images not (yet) cached and why, at most 20.
	Missing []MissingPin `json:"missing,omitempty"`
	// LastPass is when the pass ended (zero: no pass yet).
	LastPass time.Time `json:"lastPass,omitzero"`
}

// MissingPin is a pinned image the cache does not hold.
type MissingPin struct {
	Image string `json:"image"`
	Error string `json:"error"`
}

// Status returns the last pass's result.
func (w *Warmer) Status() WarmStatus {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.status
	s.Missing = slices.Clone(s.Missing)
	return s
}

// Warm runs one pass: every pinned image not known to be cached whole is fetched through
// the registry. A failure (upstream down, image gone) is reported and tried again next
// pass. Pins without a repository (bare digests) cannot be fetched and count as missing
// unless the cache holds them.
func (w *Warmer) Warm(ctx context.Context) (WarmStatus, error) {
	pins, version, err := w.Keeper.PinnedImages()
	if err != nil {
		return w.Status(), err
	}
	w.mu.Lock()
	complete := w.complete
	w.mu.Unlock()
	next := map[Pin]bool{}
	status := WarmStatus{Pinned: len(pins)}
	fetched := 0
	for _, p := range pins {
		if err := ctx.Err(); err != nil {
			return w.Status(), err
		}
		var werr error
		switch {
		case complete[p] && w.Keeper.Cached(ctx, p.Repository, p.Digest, KindManifest):
		case p.Repository == "":
			if !w.Keeper.Cached(ctx, "", p.Digest, KindBlob) {
				werr = errors.New("a bare digest names no repository: it is kept if cached, never fetched")
			}
		default:
			var n int
			n, werr = w.warmManifest(ctx, p.Repository, p.Digest, 0)
			fetched += n
			if werr == nil && p.Tag != "" && !w.Keeper.Tagged(ctx, p.Repository, p.Tag, p.Digest) {
				n, werr = w.warmTag(ctx, p)
				fetched += n
			}
		}
		if werr != nil {
			if len(status.Missing) < maxReportedMissing {
				status.Missing = append(status.Missing, MissingPin{Image: p.String(), Error: werr.Error()})
			}
			continue
		}
		next[p] = true
		status.Cached++
	}
	status.LastPass = w.Clock.Now().UTC()
	w.mu.Lock()
	w.complete, w.status, w.warmedVersion = next, status, version
	w.mu.Unlock()
	pinnedImagesGauge.Set(float64(status.Pinned))
	pinnedCachedGauge.Set(float64(status.Cached))
	if fetched > 0 || len(status.Missing) > 0 {
		w.Log.WithFields(logrus.Fields{"pinned": status.Pinned, "cached": status.Cached, "blobsFetched": fetched,
			"missing": status.Pinned - status.Cached}).Info("Warmed the cache with pinned images")
	}
	return status, nil
}

// manifestBody is the part of an index or image manifest warming reads.
type manifestBody struct {
	MediaType string          `json:"mediaType"`
	Manifests []v1.Descriptor `json:"manifests"`
	Config    *v1.Descriptor  `json:"config"`
	Layers    []v1.Descriptor `json:"layers"`
}

// warmManifest fetches manifest d of repo through the registry (from the cache when it
// holds it), then what it needs: the manifests of the wanted platforms of an index, the
// config and layers of an image. It returns how many blobs it fetched.
func (w *Warmer) warmManifest(ctx context.Context, repo string, d digest.Digest, depth int) (int, error) {
	if depth >= maxWarmDepth {
		return 0, fmt.Errorf("manifest %s: indexes nested deeper than %d", d, maxWarmDepth)
	}
	body, err := w.get(ctx, repo, "manifests", d, manifestAccept, maxManifestBytes)
	if err != nil {
		return 0, err
	}
	var m manifestBody
	if err := json.Unmarshal(body, &m); err != nil {
		return 0, fmt.Errorf("manifest %s: %w", d, err)
	}
	fetched := 0
	if len(m.Manifests) > 0 {
		wanted := 0
		for _, child := range m.Manifests {
			if !w.wants(child.Platform) {
				continue
			}
			wanted++
			n, err := w.warmManifest(ctx, repo, child.Digest, depth+1)
			fetched += n
			if err != nil {
				return fetched, err
			}
		}
		if wanted == 0 {
			return fetched, fmt.Errorf("index %s has no manifest for %s", d, platformsString(w.Platforms))
		}
		return fetched, nil
	}
	blobs := m.Layers
	if m.Config != nil {
		blobs = append([]v1.Descriptor{*m.Config}, blobs...)
	}
	for _, b := range blobs {
		if w.Keeper.Cached(ctx, repo, b.Digest, KindBlob) {
			continue
		}
		if _, err := w.get(ctx, repo, "blobs", b.Digest, "", -1); err != nil {
			return fetched, err
		}
		fetched++
		if err := w.waitStored(ctx, repo, b.Digest); err != nil {
			return fetched, err
		}
	}
	return fetched, nil
}

// storeWait bounds waiting for a fetched blob to be stored.
const storeWait = time.Minute

// waitStored waits until repo serves blob d from storage. distribution's proxy stores a
// blob it served from the upstream with a fetch of its own, in the background
// (registry/proxy/proxyblobstore.go, ServeBlob), so the answer can end before the cache
// holds it.
func (w *Warmer) waitStored(ctx context.Context, repo string, d digest.Digest) error {
	deadline := time.Now().Add(storeWait)
	for !w.Keeper.Cached(ctx, repo, d, KindBlob) {
		if time.Now().After(deadline) {
			return fmt.Errorf("blob %s: fetched, but not stored within %s", d, storeWait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

// WarmerUserAgent names the warm passes' own requests, which the hit and miss counts
// (Traffic) leave out: they are the registry filling itself, not a client's pull.
const WarmerUserAgent = "quartet-mirror-registry-warmer"

// warmTag fetches p's tag through the registry, which stores the tag's digest as the
// upstream has it now: a pod started by tag then resolves it from the cache while the
// upstream is down (the proxy answers a tag from its own storage when the upstream does
// not answer). If the tag has moved on upstream, the manifest it names now is warmed
// too; the pinned digest stays pinned.
func (w *Warmer) warmTag(ctx context.Context, p Pin) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, w.BaseURL+"/v2/"+p.Repository+"/manifests/"+p.Tag, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Accept", manifestAccept)
	req.Header.Set("User-Agent", WarmerUserAgent)
	resp, err := w.Client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("tag %s: %w", p.Tag, err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxManifestBytes))
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("tag %s: %s", p.Tag, resp.Status)
	}
	// Without a digest header the tag is stored all the same.
	if d, perr := digest.Parse(resp.Header.Get("Docker-Content-Digest")); perr == nil && d != p.Digest {
		return w.warmManifest(ctx, p.Repository, d, 0)
	}
	return 0, nil
}

// get fetches a manifest or blob through the registry and checks its digest. limit < 0
// reads the body to the end without keeping it.
func (w *Warmer) get(ctx context.Context, repo, kind string, d digest.Digest, accept string, limit int64) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, w.BaseURL+"/v2/"+repo+"/"+kind+"/"+d.String(), nil)
	if err != nil {
		return nil, err
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	req.Header.Set("User-Agent", WarmerUserAgent)
	resp, err := w.Client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", strings.TrimSuffix(kind, "s"), d, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
		return nil, fmt.Errorf("%s %s: %s: %s", strings.TrimSuffix(kind, "s"), d, resp.Status, strings.TrimSpace(string(snippet)))
	}
	verifier := d.Verifier()
	var body []byte
	if limit < 0 {
		_, err = io.Copy(verifier, resp.Body)
	} else {
		body, err = io.ReadAll(io.LimitReader(resp.Body, limit))
		if err == nil {
			_, err = verifier.Write(body)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", strings.TrimSuffix(kind, "s"), d, err)
	}
	if !verifier.Verified() {
		return nil, fmt.Errorf("%s %s: the content does not match its digest", strings.TrimSuffix(kind, "s"), d)
	}
	return body, nil
}

// wants says whether an index entry is for one of the warmed platforms. An entry without
// a platform is fetched; a platform's variant counts only when the wanted one names one.
func (w *Warmer) wants(p *v1.Platform) bool {
	if p == nil {
		return true
	}
	for _, want := range w.Platforms {
		if p.OS == want.OS && p.Architecture == want.Architecture && (want.Variant == "" || p.Variant == want.Variant) {
			return true
		}
	}
	return false
}

// ParsePlatforms reads "os/arch[/variant]" entries separated by commas.
func ParsePlatforms(s string) ([]v1.Platform, error) {
	var out []v1.Platform
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		f := strings.Split(part, "/")
		if len(f) < 2 || len(f) > 3 || f[0] == "" || f[1] == "" || (len(f) == 3 && f[2] == "") {
			return nil, fmt.Errorf("platform %q is not os/arch[/variant]", part)
		}
		p := v1.Platform{OS: f[0], Architecture: f[1]}
		if len(f) == 3 {
			p.Variant = f[2]
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, errors.New("no platform")
	}
	return out, nil
}

func platformsString(ps []v1.Platform) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.OS + "/" + p.Architecture
		if p.Variant != "" {
			s[i] += "/" + p.Variant
		}
	}
	return strings.Join(s, ",")
}

// pinsCheck is how often Run looks whether the pinned file changed: a new pin (a new
// pod's image) is fetched within it, not a whole interval later.
const pinsCheck = 10 * time.Second

// Run warms once the cache's last uses are restored, then every interval and whenever the
// pinned file changes (looked at every pinsCheck), until ctx ends.
func (w *Warmer) Run(ctx context.Context, interval time.Duration) {
	var last time.Time
	for {
		if w.Keeper.IsRestored() && (last.IsZero() || time.Since(last) >= interval || w.pinsChanged()) {
			if _, err := w.Warm(ctx); err != nil && ctx.Err() == nil {
				w.Log.WithError(err).Error("Skipped warm pass")
			}
			last = time.Now()
		}
		check := w.CheckEvery
		if check <= 0 {
			check = pinsCheck
		}
		wait := min(check, interval)
		if last.IsZero() {
			wait = time.Second // until restored
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// pinsChanged says whether the pinned file was read anew since the last pass.
func (w *Warmer) pinsChanged() bool {
	_, version, err := w.Keeper.PinnedImages()
	w.mu.Lock()
	defer w.mu.Unlock()
	return err == nil && version != w.warmedVersion
}
