package registrymirror

import (
	"context"
	"encoding/json"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/quartet-operator/quartet/internal/egress"
)

// Prober checks, from the manager, what a mirror's users depend on: that its registry
// answers through its Service, and that its upstream answers at all. The manager runs in
// the cluster, so it sees the network the mirror's clients and registry see.
type Prober interface {
	// Registry returns nil when GET /v2/ at the registry's Service address (host:port)
	// answers 200 (a pull-through cache answers it without asking the upstream).
	Registry(ctx context.Context, addr string) error
	// Upstream returns nil when GET <upstream>/v2/ gets any HTTP answer (401 included: a
	// registry that wants a login is reachable; a redirect is not followed, it is an
	// answer too). An address probes may not dial is an error that is errAddressRefused.
	Upstream(ctx context.Context, upstream string) error
	// Cache returns the registry's report on its cache (GET /quartet/cache at its Service
	// address, cmd/mirror-registry): the pinned images and the volume's fill.
	Cache(ctx context.Context, addr string) (CacheReport, error)
}

// CacheReport is mirror-registry's answer at /quartet/cache.
type CacheReport struct {
	// Pinned is the number of images in its pinned file, Cached how many it holds whole.
	Pinned int32 `json:"pinned"`
	Cached int32 `json:"cached"`
	// LastPass is when its warm pass ended; zero before the first.
	LastPass metav1.Time `json:"lastPass,omitzero"`
	// DiskUsedBytes of DiskCapacityBytes of the cache volume (statfs) at its last eviction
	// pass; capacity 0 before the first.
	DiskUsedBytes     uint64 `json:"diskUsedBytes"`
	DiskCapacityBytes uint64 `json:"diskCapacityBytes"`
	// The blob GETs (layers, configs) served since the registry started: from its cache
	// (hits) or fetched from the upstream (misses), and their bytes.
	BlobHits          uint64 `json:"blobHits"`
	BlobMisses        uint64 `json:"blobMisses"`
	BytesFromCache    uint64 `json:"bytesFromCache"`
	BytesFromUpstream uint64 `json:"bytesFromUpstream"`
}

// probeTimeout bounds one probe: a mirror's status must not wait on a black hole.
const probeTimeout = 5 * time.Second

// upstreamCacheTTL is how long an upstream's answer serves every mirror of it, so many
// mirrors of one upstream (or frequent passes) do not multiply requests to it.
const upstreamCacheTTL = 20 * time.Second

// NewHTTPProber probes over HTTP(S) with the manager's trust store. A namespace's
// editor names the upstream, so the probes follow no redirect and never connect to an
// address egress.AddressAllowed refuses, unless it lies in one of the allowed ranges
// (--registrymirror-probe-allowed-cidrs): egress.NewClient.
//
// The registry probe goes through the same client. It dials the ClusterIP of the
// mirror's own Service, which the API server allocates from the Service range, so the
// rule never stands in its way in a real cluster; one client under one rule is simpler
// to trust than two.
func NewHTTPProber(clk clock.PassiveClock, allowed []netip.Prefix) Prober {
	return &httpProber{
		client:   egress.NewClient(probeTimeout, allowed),
		allowed:  allowed,
		clock:    clk,
		upstream: map[string]probeResult{},
	}
}

type probeResult struct {
	err error
	at  time.Time
}

type httpProber struct {
	client  *http.Client
	allowed []netip.Prefix
	clock   clock.PassiveClock

	mu       sync.Mutex
	upstream map[string]probeResult
}

func (p *httpProber) get(ctx context.Context, rawURL string) (int, error) {
	return egress.Get(ctx, p.client, p.allowed, rawURL, probeTimeout)
}

func (p *httpProber) Registry(ctx context.Context, addr string) error {
	code, err := p.get(ctx, "http://"+addr+"/v2/")
	if err == nil && code != http.StatusOK {
		err = statusError{Code: code}
	}
	if err != nil {
		ctrl.LoggerFrom(ctx).V(1).Info("Registry probe failed", "address", addr, "error", err)
	}
	return err
}

func (p *httpProber) Cache(ctx context.Context, addr string) (CacheReport, error) {
	code, body, err := egress.GetBody(ctx, p.client, p.allowed, "http://"+addr+cacheReportPath, probeTimeout)
	if err == nil && code != http.StatusOK {
		err = statusError{Code: code}
	}
	var rep CacheReport
	if err == nil {
		err = json.Unmarshal(body, &rep)
	}
	if err != nil {
		ctrl.LoggerFrom(ctx).V(1).Info("Cache report failed", "address", addr, "error", err)
		return CacheReport{}, err
	}
	return rep, nil
}

// cacheReportPath is where mirror-registry reports on its cache.
const cacheReportPath = "/quartet/cache"

func (p *httpProber) Upstream(ctx context.Context, upstream string) error {
	now := p.clock.Now()
	p.mu.Lock()
	if r, ok := p.upstream[upstream]; ok && now.Sub(r.at) < upstreamCacheTTL {
		p.mu.Unlock()
		return r.err
	}
	p.mu.Unlock()
	_, err := p.get(ctx, strings.TrimSuffix(upstream, "/")+"/v2/")
	if err != nil {
		// The error's text stays here: status and Events say only probeFailure(err).
		ctrl.LoggerFrom(ctx).V(1).Info("Upstream probe failed", "upstream", upstream, "error", err)
	}
	p.mu.Lock()
	// Answers past their TTL serve nobody: drop them, so the memo holds the upstreams
	// probed within the last upstreamCacheTTL, not every URL a spec has ever named.
	for u, r := range p.upstream {
		if now.Sub(r.at) >= upstreamCacheTTL {
			delete(p.upstream, u)
		}
	}
	p.upstream[upstream] = probeResult{err: err, at: now}
	p.mu.Unlock()
	return err
}

// statusError is a registry's answer other than 200.
type statusError = egress.StatusError

// What the status and Events say about a failed probe, in place of the error's text
// (egress.Failure): the text can carry whatever the other end sent (a banner, an internal
// host name), and a namespace's editor chooses the other end. The manager's log has the
// text.
const (
	phraseAddressRefused = egress.PhraseAddressRefused
	phraseNoName         = egress.PhraseNoName
	phraseRefused        = egress.PhraseRefused
	phraseNoRoute        = egress.PhraseNoRoute
	phraseTimedOut       = egress.PhraseTimedOut
	phraseTLS            = egress.PhraseTLS
	phraseClosed         = egress.PhraseClosed
	phraseNotHTTP        = egress.PhraseNotHTTP
	phraseErrorStatus    = egress.PhraseErrorStatus
	phraseOther          = egress.PhraseOther
)

// probeFailure is the phrase status and Events use for a failed probe's error.
func probeFailure(err error) string { return egress.Failure(err) }
