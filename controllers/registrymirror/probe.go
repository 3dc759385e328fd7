package registrymirror

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Prober checks, from the manager, what a mirror's users depend on: that its registry
// answers through its Service, and that its upstream answers at all. The manager runs in
// the cluster, so it sees the network the mirror's clients and registry see.
type Prober interface {
	// Registry returns nil when GET /v2/ at the registry's Service address (host:port)
	// answers 200 (a pull-through cache answers it without asking the upstream).
	Registry(ctx context.Context, addr string) error
	// Upstream returns nil when GET <upstream>/v2/ gets any HTTP answer (401 included: a
	// registry that wants a login is reachable).
	Upstream(ctx context.Context, upstream string) error
}

// probeTimeout bounds one probe: a mirror's status must not wait on a black hole.
const probeTimeout = 5 * time.Second

// upstreamCacheTTL is how long an upstream's answer serves every mirror of it, so many
// mirrors of one upstream (or frequent passes) do not multiply requests to it.
const upstreamCacheTTL = 20 * time.Second

// NewHTTPProber probes over HTTP(S) with the manager's trust store.
func NewHTTPProber(clk clock.PassiveClock) Prober {
	return &httpProber{
		client: &http.Client{Timeout: probeTimeout, Transport: &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			TLSHandshakeTimeout:   probeTimeout,
			ResponseHeaderTimeout: probeTimeout,
			MaxIdleConnsPerHost:   2,
			IdleConnTimeout:       90 * time.Second,
		}},
		clock:    clk,
		upstream: map[string]probeResult{},
	}
}

type probeResult struct {
	err error
	at  time.Time
}

type httpProber struct {
	client *http.Client
	clock  clock.PassiveClock

	mu       sync.Mutex
	upstream map[string]probeResult
}

func (p *httpProber) get(ctx context.Context, url string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

func (p *httpProber) Registry(ctx context.Context, addr string) error {
	code, err := p.get(ctx, "http://"+addr+"/v2/")
	if err != nil {
		return err
	}
	if code != http.StatusOK {
		return fmt.Errorf("GET /v2/ answered %d", code)
	}
	return nil
}

func (p *httpProber) Upstream(ctx context.Context, upstream string) error {
	now := p.clock.Now()
	p.mu.Lock()
	if r, ok := p.upstream[upstream]; ok && now.Sub(r.at) < upstreamCacheTTL {
		p.mu.Unlock()
		return r.err
	}
	p.mu.Unlock()
	_, err := p.get(ctx, strings.TrimSuffix(upstream, "/")+"/v2/")
	p.mu.Lock()
	p.upstream[upstream] = probeResult{err: err, at: now}
	p.mu.Unlock()
	return err
}
