package retention

import (
	"cmp"
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

// manifestAccept is every manifest type a pull accepts: OCI and Docker indexes and manifests.
var manifestAccept = strings.Join([]string{
	v1.MediaTypeImageIndex, v1.MediaTypeImageManifest,
	"application/vnd.docker.distribution.manifest.list.v2+json",
	"application/vnd.docker.distribution.manifest.v2+json",
}, ", ")

// maxManifestBytes bounds a manifest read while warming (distribution's own limit is 4 MiB).
const maxManifestBytes = 4 << 20

// maxWarmDepth bounds index nesting (an index of indexes is legal, a deep chain a mistake).
const maxWarmDepth = 3

const maxReportedMissing = 20 // pins WarmStatus lists as missing

// Warmer fetches pinned images the cache does not hold through the registry's own address,
// as a pull would, so the proxy stores them before the upstream link fails (of an index,
// the manifests of Platforms only). It remembers only the pins found fully cached (a
// restart makes the next pass look at every pin again) and the last WarmStatus.
type Warmer struct {
	BaseURL    string // the registry's own address, "http://127.0.0.1:5000"
	Client     *http.Client
	Platforms  []v1.Platform
	Keeper     *Keeper
	Clock      Clock
	Log        logrus.FieldLogger
	CheckEvery time.Duration // how often Run looks whether the pinned file changed (0: pinsCheck)

	mu            sync.Mutex
	complete      map[Pin]bool
	status        WarmStatus
	warmedVersion uint64 // the pinned file's version the last pass read
}

// WarmStatus is what the last warm pass found (served in GET /quartet/cache).
type WarmStatus struct {
	Pinned   int          `json:"pinned"`            // pinned images (lines of the pinned file)
	Cached   int          `json:"cached"`            // held whole: manifest, the warmed platforms' manifests, configs, layers
	Missing  []MissingPin `json:"missing,omitempty"` // pinned images not (yet) cached and why, at most 20
	LastPass time.Time    `json:"lastPass,omitzero"` // when the pass ended (zero: no pass yet)
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
// the registry; a failure (upstream down, image gone) is reported and tried again next
// pass. Bare digests cannot be fetched and count as missing unless the cache holds them.
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
		case complete[p] && w.Keeper.store.cached(ctx, p.Repository, p.Digest, KindManifest):
		case p.Repository == "":
			if !w.Keeper.store.cached(ctx, "", p.Digest, KindBlob) {
				werr = errors.New("a bare digest names no repository: it is kept if cached, never fetched")
			}
		default:
			werr = w.warmManifest(ctx, p.Repository, p.Digest, 0, &fetched)
			if werr == nil && p.Tag != "" && !w.Keeper.store.taggedAs(ctx, p.Repository, p.Tag, p.Digest) {
				werr = w.warmTag(ctx, p, &fetched)
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
	Manifests []v1.Descriptor `json:"manifests"`
	Config    *v1.Descriptor  `json:"config"`
	Layers    []v1.Descriptor `json:"layers"`
}

// warmManifest fetches manifest d of repo through the registry, then what it needs: an
// index's manifests of the wanted platforms, an image's config and layers (counted in fetched).
func (w *Warmer) warmManifest(ctx context.Context, repo string, d digest.Digest, depth int, fetched *int) error {
	if depth >= maxWarmDepth {
		return fmt.Errorf("manifest %s: indexes nested deeper than %d", d, maxWarmDepth)
	}
	body, err := w.get(ctx, repo, "manifests", d)
	if err != nil {
		return err
	}
	var m manifestBody
	if err := json.Unmarshal(body, &m); err != nil {
		return fmt.Errorf("manifest %s: %w", d, err)
	}
	if len(m.Manifests) > 0 {
		wanted := 0
		for _, child := range m.Manifests {
			if !w.wants(child.Platform) {
				continue
			}
			wanted++
			if err := w.warmManifest(ctx, repo, child.Digest, depth+1, fetched); err != nil {
				return err
			}
		}
		if wanted == 0 {
			return fmt.Errorf("index %s has no manifest for %s", d, platformsString(w.Platforms))
		}
		return nil
	}
	blobs := m.Layers
	if m.Config != nil {
		blobs = append([]v1.Descriptor{*m.Config}, blobs...)
	}
	for _, b := range blobs {
		if w.Keeper.store.cached(ctx, repo, b.Digest, KindBlob) {
			continue
		}
		if _, err := w.get(ctx, repo, "blobs", b.Digest); err != nil {
			return err
		}
		*fetched++
		if err := w.waitStored(ctx, repo, b.Digest); err != nil {
			return err
		}
	}
	return nil
}

const storeWait = time.Minute // bounds waiting for a fetched blob to be stored

// waitStored waits until repo serves blob d from storage: distribution's proxy stores what
// it served from the upstream with a fetch of its own in the background (proxyblobstore.go,
// ServeBlob), so the answer can end before the cache holds it.
func (w *Warmer) waitStored(ctx context.Context, repo string, d digest.Digest) error {
	deadline := time.Now().Add(storeWait)
	for !w.Keeper.store.cached(ctx, repo, d, KindBlob) {
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
// upstream does not answer. If the tag has moved on upstream, the manifest it names now is
// warmed too; the pinned digest stays pinned.
func (w *Warmer) warmTag(ctx context.Context, p Pin, fetched *int) error {
	resp, err := w.request(ctx, p.Repository, "manifests", p.Tag)
	if err != nil {
		return fmt.Errorf("tag %s: %w", p.Tag, err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxManifestBytes))
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("tag %s: %s", p.Tag, resp.Status)
	}
	// Without a digest header the tag is stored all the same.
	if d, perr := digest.Parse(resp.Header.Get("Docker-Content-Digest")); perr == nil && d != p.Digest {
		return w.warmManifest(ctx, p.Repository, d, 0, fetched)
	}
	return nil
}

// request GETs repo's "manifests" or "blobs" ref through the registry, as the warmer.
func (w *Warmer) request(ctx context.Context, repo, kind, ref string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, w.BaseURL+"/v2/"+repo+"/"+kind+"/"+ref, nil)
	if err != nil {
		return nil, err
	}
	if kind == "manifests" {
		req.Header.Set("Accept", manifestAccept)
	}
	req.Header.Set("User-Agent", WarmerUserAgent)
	return w.Client.Do(req)
}

// get fetches a manifest (returned) or a blob (discarded) through the registry and checks its digest.
func (w *Warmer) get(ctx context.Context, repo, kind string, d digest.Digest) (body []byte, err error) {
	what := strings.TrimSuffix(kind, "s") + " " + d.String()
	resp, err := w.request(ctx, repo, kind, d.String())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
		return nil, fmt.Errorf("%s: %s: %s", what, resp.Status, strings.TrimSpace(string(snippet)))
	}
	verifier := d.Verifier()
	if kind == "manifests" {
		body, err = io.ReadAll(io.TeeReader(io.LimitReader(resp.Body, maxManifestBytes), verifier))
	} else {
		_, err = io.Copy(verifier, resp.Body)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if !verifier.Verified() {
		return nil, fmt.Errorf("%s: the content does not match its digest", what)
	}
	return body, nil
}

// wants says whether an index entry is for one of the warmed platforms. An entry without
// a platform is fetched; a platform's variant counts only when the wanted one names one.
func (w *Warmer) wants(p *v1.Platform) bool {
	return p == nil || slices.ContainsFunc(w.Platforms, func(want v1.Platform) bool {
		return p.OS == want.OS && p.Architecture == want.Architecture && (want.Variant == "" || p.Variant == want.Variant)
	})
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

// pinsCheck is how often Run looks for a changed pinned file: a new pod's image is fetched within it.
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
		wait := min(cmp.Or(max(w.CheckEvery, 0), pinsCheck), interval)
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
