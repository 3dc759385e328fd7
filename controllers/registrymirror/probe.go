package registrymirror

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/utils/clock"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
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
}

// probeTimeout bounds one probe: a mirror's status must not wait on a black hole.
const probeTimeout = 5 * time.Second

// upstreamCacheTTL is how long an upstream's answer serves every mirror of it, so many
// mirrors of one upstream (or frequent passes) do not multiply requests to it.
const upstreamCacheTTL = 20 * time.Second

// NewHTTPProber probes over HTTP(S) with the manager's trust store. A namespace's
// editor names the upstream, so the probes follow no redirect and never connect to an
// address probeAddressAllowed refuses, unless it lies in one of the allowed ranges
// (--registrymirror-probe-allowed-cidrs).
//
// The registry probe goes through the same client. It dials the ClusterIP of the
// mirror's own Service, which the API server allocates from the Service range, so the
// rule never stands in its way in a real cluster; one client under one rule is simpler
// to trust than two.
//
// A proxy from HTTPS_PROXY or HTTP_PROXY is dialed under the same rule (one on loopback
// needs its range allowed); the proxy then resolves the upstream's name and decides what
// it reaches, so only an upstream written as an IP address is checked before it is asked.
func NewHTTPProber(clk clock.PassiveClock, allowed []netip.Prefix) Prober {
	dialer := &net.Dialer{Timeout: probeTimeout, KeepAlive: 30 * time.Second, ControlContext: probeDialControl(allowed)}
	return &httpProber{
		client: &http.Client{
			Timeout: probeTimeout,
			Transport: &http.Transport{
				Proxy:       http.ProxyFromEnvironment,
				DialContext: dialer.DialContext,
				// As http.DefaultTransport: a DialContext of its own would turn HTTP/2 off.
				ForceAttemptHTTP2:     true,
				TLSHandshakeTimeout:   probeTimeout,
				ResponseHeaderTimeout: probeTimeout,
				MaxIdleConnsPerHost:   2,
				IdleConnTimeout:       90 * time.Second,
			},
			// A redirect is an answer. Following it would take the manager wherever the
			// upstream points (a public name can point at an internal service) and
			// report on that place instead.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
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
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return 0, err
	}
	// The dialer checks every address it connects to; this catches an IP address that
	// would go to a proxy instead.
	if ip, err := netip.ParseAddr(req.URL.Hostname()); err == nil && !probeAddressAllowed(ip, p.allowed) {
		return 0, &url.Error{Op: "Get", URL: rawURL, Err: addressRefusedError{ip}}
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
	if err == nil && code != http.StatusOK {
		err = statusError{code}
	}
	if err != nil {
		logf.FromContext(ctx).V(1).Info("Registry probe failed", "address", addr, "error", err)
	}
	return err
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
	if err != nil {
		// The error's text stays here: status and Events say only probeFailure(err).
		logf.FromContext(ctx).V(1).Info("Upstream probe failed", "upstream", upstream, "error", err)
	}
	p.mu.Lock()
	p.upstream[upstream] = probeResult{err: err, at: now}
	p.mu.Unlock()
	return err
}

// statusError is a registry's answer other than 200.
type statusError struct{ code int }

func (e statusError) Error() string { return fmt.Sprintf("GET /v2/ answered %d", e.code) }

// What the status and Events say about a failed probe, in place of the error's text:
// the text can carry whatever the other end sent (a banner, an internal host name), and
// a namespace's editor chooses the other end. The manager's log has the text.
const (
	phraseAddressRefused = "address not allowed for probes (loopback, link-local or metadata)"
	phraseNoName         = "the host name did not resolve"
	phraseRefused        = "connection refused"
	phraseNoRoute        = "no route to the address"
	phraseTimedOut       = "timed out"
	phraseTLS            = "TLS handshake failed"
	phraseClosed         = "the connection closed without an answer"
	phraseNotHTTP        = "the answer was not HTTP"
	phraseErrorStatus    = "answered with an HTTP error status"
	phraseOther          = "the request failed (details in the manager's log)"
)

// probeFailure is the phrase status and Events use for a failed probe's error.
func probeFailure(err error) string {
	var (
		dnsErr *net.DNSError
		status statusError
		netErr net.Error
	)
	switch {
	case errors.Is(err, errAddressRefused):
		return phraseAddressRefused
	case errors.As(err, &status):
		return phraseErrorStatus
	case errors.As(err, &dnsErr):
		return phraseNoName
	case errors.Is(err, syscall.ECONNREFUSED):
		return phraseRefused
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return phraseNoRoute
	case isTLSFailure(err):
		return phraseTLS
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return phraseTimedOut
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return phraseClosed
	case strings.Contains(err.Error(), "malformed HTTP"):
		// net/http has no error type for an answer that is not HTTP.
		return phraseNotHTTP
	}
	return phraseOther
}

// isTLSFailure says whether err comes from a TLS handshake that did not succeed.
func isTLSFailure(err error) bool {
	var (
		verify  *tls.CertificateVerificationError
		record  tls.RecordHeaderError
		alert   tls.AlertError
		unknown x509.UnknownAuthorityError
		host    x509.HostnameError
		invalid x509.CertificateInvalidError
		op      *net.OpError
	)
	return errors.As(err, &verify) || errors.As(err, &record) || errors.As(err, &alert) ||
		errors.As(err, &unknown) || errors.As(err, &host) || errors.As(err, &invalid) ||
		// An alert from the other end (crypto/tls has no exported type for it over TCP).
		errors.As(err, &op) && op.Op == "remote error" ||
		// net/http's answer to a plain HTTP server behind an https:// upstream.
		strings.Contains(err.Error(), "server gave HTTP response to HTTPS client")
}
