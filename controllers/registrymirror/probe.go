package registrymirror

import (
	"context"
	"encoding/json"
	"net/http"
	"net/netip"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mirrorsv1alpha1 "github.com/quartet-operator/quartet/api/mirrors/v1alpha1"
	"github.com/quartet-operator/quartet/internal/egress"
)

// Prober checks from the manager, on its clients' network, what a mirror's users depend on.
type Prober interface {
	// Registry returns nil when GET /v2/ at addr answers 200 (without asking the upstream).
	Registry(ctx context.Context, addr string) error
	// Upstream returns nil when GET <upstream>/v2/ gets any HTTP answer (401 and a redirect,
	// not followed, included). An address probes may not dial is egress.ErrAddressRefused.
	Upstream(ctx context.Context, upstream string) error
	// Cache returns the registry's report on its cache (GET /quartet/cache).
	Cache(ctx context.Context, addr string) (CacheReport, error)
}

// CacheReport is mirror-registry's answer at /quartet/cache.
type CacheReport struct {
	Pinned            int32       `json:"pinned"` // images in its pinned file
	Cached            int32       `json:"cached"` // of them, held whole
	LastPass          metav1.Time `json:"lastPass,omitzero"`
	DiskUsedBytes     uint64      `json:"diskUsedBytes"`     // of the cache volume (statfs)
	DiskCapacityBytes uint64      `json:"diskCapacityBytes"` // 0 before the first eviction pass
	BlobHits          uint64      `json:"blobHits"`          // since the registry started
	BlobMisses        uint64      `json:"blobMisses"`
	BytesFromCache    uint64      `json:"bytesFromCache"`
	BytesFromUpstream uint64      `json:"bytesFromUpstream"`
	// The fetches behind the misses, since the registry started: each blob fetched once
	// however many requests waited for it (coalesced).
	UpstreamFetches          uint64 `json:"upstreamFetches"` // blob fetches started
	UpstreamFetchFailures    uint64 `json:"upstreamFetchFailures"`
	UpstreamFetchedBytes     uint64 `json:"upstreamFetchedBytes"`
	CoalescedWaiters         uint64 `json:"coalescedWaiters"` // blob requests that read another's fetch
	CoalescedManifestWaiters uint64 `json:"coalescedManifestWaiters"`
}

// probeTimeout bounds one probe: a status must not wait on a black hole.
const probeTimeout = 5 * time.Second

// NewHTTPProber probes through egress.NewClient: a namespace's editor names the upstream,
// so no redirect is followed and no refused address dialed, the registry's under one rule.
func NewHTTPProber(allowed []netip.Prefix) Prober {
	return &httpProber{client: egress.NewClient(probeTimeout, allowed), allowed: allowed}
}

type httpProber struct {
	client  *http.Client
	allowed []netip.Prefix
}

func (p *httpProber) Registry(ctx context.Context, addr string) error {
	code, err := egress.Get(ctx, p.client, p.allowed, "http://"+addr+"/v2/", probeTimeout)
	if err == nil && code != http.StatusOK {
		err = egress.StatusError{Code: code}
	}
	if err != nil {
		ctrl.LoggerFrom(ctx).V(1).Info("Registry probe failed", "address", addr, "error", err)
	}
	return err
}

func (p *httpProber) Cache(ctx context.Context, addr string) (CacheReport, error) {
	code, body, err := egress.GetBody(ctx, p.client, p.allowed, "http://"+addr+"/quartet/cache", probeTimeout)
	if err == nil && code != http.StatusOK {
		err = egress.StatusError{Code: code}
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

func (p *httpProber) Upstream(ctx context.Context, upstream string) error {
	_, err := egress.Get(ctx, p.client, p.allowed, strings.TrimSuffix(upstream, "/")+"/v2/", probeTimeout)
	if err != nil {
		// The text stays in the log: it can carry whatever the other end sent.
		ctrl.LoggerFrom(ctx).V(1).Info("Upstream probe failed", "upstream", upstream, "error", err)
	}
	return err
}

// probe asks the upstream, the registry and its cache reports.
func (r *Reconciler) probe(ctx context.Context, m *mirrorsv1alpha1.RegistryMirror, w workloads, service *corev1.Service) probeResults {
	if r.Prober == nil {
		return probeResults{off: true}
	}
	var p probeResults
	p.upstreamProbed, p.upstreamErr = true, r.memory.probeUpstream(ctx, client.ObjectKeyFromObject(m), upstreamURL(m), r.Clock.Now(), r.Prober.Upstream)
	if p.registryAddr, p.registryProbed = registryAddress(w.readyRegistries(), service); p.registryProbed {
		p.registryErr = r.Prober.Registry(ctx, p.registryAddr)
	}
	if p.registryProbed && p.registryErr == nil {
		var reports []CacheReport
		for _, addr := range cacheReportAddresses(m, w, p.registryAddr) {
			if rep, err := r.Prober.Cache(ctx, addr); err == nil { // else the prober logs why
				reports = append(reports, rep)
			}
		}
		p.cache = mergeCacheReports(reports)
	}
	return p
}
