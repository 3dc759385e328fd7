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
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quartet-operator/quartet/internal/scope"
	"github.com/quartet-operator/quartet/test/testenv"

	mirrorsv1alpha1 "github.com/quartet-operator/quartet/api/mirrors/v1alpha1"
	"github.com/quartet-operator/quartet/internal/egress"
)

func TestProbeFailure(t *testing.T) {
	get := func(err error) error { return &url.Error{Op: "Get", URL: "https://up.example:5000/v2/", Err: err} }
	dial := func(err error) error {
		return get(&net.OpError{Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.ParseIP("10.213.0.2"), Port: 5000}, Err: err})
	}
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"address refused at connect", dial(egress.AddressRefusedError{Addr: netip.MustParseAddr("169.254.169.254")}), egress.PhraseAddressRefused},
		{"address refused before a proxy", get(egress.AddressRefusedError{Addr: netip.MustParseAddr("127.0.0.1")}), egress.PhraseAddressRefused},
		{"name not found", dial(&net.DNSError{Err: "no such host", Name: "internal-secret.corp", IsNotFound: true}), egress.PhraseNoName},
		{"name lookup timed out", dial(&net.DNSError{Err: "i/o timeout", Name: "internal-secret.corp", IsTimeout: true}), egress.PhraseNoName},
		{"connection refused", dial(os.NewSyscallError("connect", syscall.ECONNREFUSED)), egress.PhraseRefused},
		{"no route to host", dial(os.NewSyscallError("connect", syscall.EHOSTUNREACH)), egress.PhraseNoRoute},
		{"network unreachable", dial(os.NewSyscallError("connect", syscall.ENETUNREACH)), egress.PhraseNoRoute},
		{"dial timeout", dial(os.ErrDeadlineExceeded), egress.PhraseTimedOut},
		{"context deadline", get(context.DeadlineExceeded), egress.PhraseTimedOut},
		{"unknown authority", get(&tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}), egress.PhraseTLS},
		{"wrong host name", get(x509.HostnameError{Certificate: &x509.Certificate{}, Host: "internal-secret.corp"}), egress.PhraseTLS},
		{"not TLS", get(tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}), egress.PhraseTLS},
		{"alert from the server", get(&net.OpError{Op: "remote error", Err: errors.New("tls: handshake failure")}), egress.PhraseTLS},
		{"plain HTTP behind https", get(errors.New("http: server gave HTTP response to HTTPS client")), egress.PhraseTLS},
		{"reset", dial(os.NewSyscallError("read", syscall.ECONNRESET)), egress.PhraseClosed},
		{"closed", get(io.EOF), egress.PhraseClosed},
		{"a banner", get(fmt.Errorf("net/http: HTTP/1.x transport connection broken: %w",
			fmt.Errorf("malformed HTTP response %q", "SSH-2.0-OpenSSH_9.6 internal-secret"))), egress.PhraseNotHTTP},
		{"registry answers 503", egress.StatusError{Code: 503}, egress.PhraseErrorStatus},
		{"anything else", get(errors.New("proxyconnect tcp: internal-secret.corp said no")), egress.PhraseOther},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := egress.Failure(tc.err)
			assert.Equal(t, tc.want, got)
			assert.NotContains(t, got, "internal-secret")
			assert.NotContains(t, got, "10.213.0.2")
		})
	}
}

// loopback lets tests probe their own servers.
var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}

// newTestProber is the manager's prober, without the proxy the test's environment may name.
func newTestProber(allowed []netip.Prefix) *httpProber {
	p := NewHTTPProber(allowed).(*httpProber)
	p.client.Transport.(*http.Transport).Proxy = nil
	return p
}

// countingServer answers every request with code and counts them.
func countingServer(t *testing.T, code int) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var hits atomic.Int32
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		w.WriteHeader(code)
	}))
	t.Cleanup(s.Close)
	return s, &hits
}

// redirectingServer redirects every request to target and counts them.
func redirectingServer(t *testing.T, target string) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var hits atomic.Int32
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.Redirect(w, r, target, http.StatusFound)
	}))
	t.Cleanup(s.Close)
	return s, &hits
}

// TestUpstreamProbeFollowsNoRedirect: an upstream that redirects has answered; the
// manager does not go where it points.
func TestUpstreamProbeFollowsNoRedirect(t *testing.T) {
	elsewhere, elsewhereHits := countingServer(t, http.StatusOK)
	// Another host name, as a redirect to an internal service would have.
	target := strings.Replace(elsewhere.URL, "127.0.0.1", "localhost", 1) + "/v2/"
	upstream, upstreamHits := redirectingServer(t, target)

	require.NoError(t, newTestProber(loopback).Upstream(context.Background(), upstream.URL), "a 302 is an answer")
	assert.Equal(t, int32(1), upstreamHits.Load())
	assert.Equal(t, int32(0), elsewhereHits.Load(), "the redirect was not followed")

	// The registry probe does not follow one either: only a 200 of its own is an answer.
	registry, registryHits := redirectingServer(t, target)
	err := newTestProber(loopback).Registry(context.Background(), strings.TrimPrefix(registry.URL, "http://"))
	require.Error(t, err)
	assert.Equal(t, egress.PhraseErrorStatus, egress.Failure(err))
	assert.Equal(t, int32(1), registryHits.Load())
	assert.Equal(t, int32(0), elsewhereHits.Load(), "the redirect was not followed")
}

// TestUpstreamProbeMemo: one upstream's answer serves for upstreamCacheTTL, every mirror of
// it; then it is asked again, and a mirror keeps no answer of an upstream it no longer has.
func TestUpstreamProbeMemo(t *testing.T) {
	a, aHits := countingServer(t, http.StatusOK)
	b, bHits := countingServer(t, http.StatusOK)
	probe := newTestProber(loopback).Upstream
	now := time.Now()
	var mem memory
	x, y := types.NamespacedName{Namespace: "ns", Name: "x"}, types.NamespacedName{Namespace: "ns", Name: "y"}
	ctx := context.Background()

	require.NoError(t, mem.probeUpstream(ctx, x, a.URL, now, probe))
	require.NoError(t, mem.probeUpstream(ctx, x, a.URL, now, probe))
	require.NoError(t, mem.probeUpstream(ctx, y, a.URL, now, probe))
	assert.Equal(t, int32(1), aHits.Load(), "the second pass within the TTL, and another mirror of a, use the first answer")

	now = now.Add(upstreamCacheTTL)
	require.NoError(t, mem.probeUpstream(ctx, x, b.URL, now, probe))
	assert.Equal(t, int32(1), bHits.Load())
	require.Len(t, mem.mirrors, 1, "y used x's answer")
	assert.Equal(t, b.URL, mem.mirrors[x].probedURL, "one answer per mirror: x's answer of a is dropped")
	require.NoError(t, mem.probeUpstream(ctx, y, a.URL, now, probe))
	assert.Equal(t, int32(2), aHits.Load(), "asked again after the TTL")
	mem.forget(x)
	assert.Len(t, mem.mirrors, 1, "forgotten with the mirror")
}

// TestUpstreamProbeRefusesLoopback: an upstream on the manager's own host is not asked,
// whether it is written as an address or as a name that resolves to one, unless an admin
// allows the range.
func TestUpstreamProbeRefusesLoopback(t *testing.T) {
	server, hits := countingServer(t, http.StatusUnauthorized)
	byName := strings.Replace(server.URL, "127.0.0.1", "localhost", 1)
	for _, upstream := range []string{server.URL, byName} {
		err := newTestProber(nil).Upstream(context.Background(), upstream)
		require.ErrorIs(t, err, egress.ErrAddressRefused, upstream)
		assert.Equal(t, egress.PhraseAddressRefused, egress.Failure(err))
	}
	assert.Equal(t, int32(0), hits.Load(), "no request reached the server")
	_, port, _ := strings.Cut(strings.TrimPrefix(server.URL, "http://"), ":")
	err := newTestProber(nil).Registry(context.Background(), "127.0.0.1:"+port)
	assert.ErrorIs(t, err, egress.ErrAddressRefused, "the registry probe dials under the same rule")
	assert.Equal(t, int32(0), hits.Load(), "no request reached the server")

	for _, upstream := range []string{server.URL, byName} {
		assert.NoError(t, newTestProber(loopback).Upstream(context.Background(), upstream), "%s with 127.0.0.0/8 allowed", upstream)
	}
	assert.Equal(t, int32(2), hits.Load(), "probed once per upstream with loopback allowed")
}

// TestUpstreamProbeChecksAddressesBeforeAProxy: with a proxy, the manager dials only the
// proxy; an upstream written as a refused address is not handed to it.
func TestUpstreamProbeChecksAddressesBeforeAProxy(t *testing.T) {
	proxy, proxyHits := countingServer(t, http.StatusBadGateway)
	p := newTestProber(loopback)
	proxyURL, err := url.Parse(proxy.URL)
	require.NoError(t, err)
	p.client.Transport.(*http.Transport).Proxy = http.ProxyURL(proxyURL)

	for _, upstream := range []string{"http://169.254.169.254", "http://[fd00:ec2::254]", "http://100.100.100.200:80"} {
		assert.ErrorIs(t, p.Upstream(context.Background(), upstream), egress.ErrAddressRefused, upstream)
	}
	assert.Equal(t, int32(0), proxyHits.Load(), "the proxy was not asked for a metadata address")
	assert.NoError(t, p.Upstream(context.Background(), "http://10.213.0.2:5002"), "an allowed address goes through the proxy")
	assert.Equal(t, int32(1), proxyHits.Load())
}

// TestUpstreamStatusCarriesNoErrorText: what real failed probes leave in the status is a
// phrase, not the error: no dial details, no banner of whatever listens there.
func TestUpstreamStatusCarriesNoErrorText(t *testing.T) {
	closedPort := func() string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := l.Addr().String()
		require.NoError(t, l.Close())
		return "http://" + addr
	}
	// listener answers each connection's request with reply (none: closes it).
	listener := func(reply string) string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		t.Cleanup(func() { _ = l.Close() })
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				_, _ = c.Read(make([]byte, 4096))
				_, _ = io.WriteString(c, reply)
				_ = c.Close()
			}
		}()
		return "http://" + l.Addr().String()
	}
	// The listeners first: a port closedPort has just given back may be the next one a
	// listener binds.
	ssh, closesAtOnce := listener("SSH-2.0-OpenSSH_9.6 banner-secret\r\n"), listener("")
	for _, tc := range []struct {
		name     string
		upstream string
		allowed  []netip.Prefix
		reason   string
		phrase   string
	}{
		{"nothing listens", closedPort(), loopback, mirrorsv1alpha1.ReasonNeverReached, egress.PhraseRefused},
		{"an SSH server", ssh, loopback, mirrorsv1alpha1.ReasonNeverReached, egress.PhraseNotHTTP},
		{"closes at once", closesAtOnce, loopback, mirrorsv1alpha1.ReasonNeverReached, egress.PhraseClosed},
		{"loopback not allowed", closedPort(), nil, mirrorsv1alpha1.ReasonAddressRefused, egress.PhraseAddressRefused},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := newTestProber(tc.allowed).Upstream(context.Background(), tc.upstream)
			require.Error(t, err)
			m := minimalMirror()
			m.Spec.Upstream = tc.upstream
			st := computeStatus(m, outcome{probes: probeResults{upstreamProbed: true, upstreamErr: err}}, metav1.Now())
			c := meta.FindStatusCondition(st.Conditions, mirrorsv1alpha1.ConditionUpstreamReachable)
			require.NotNil(t, c)
			assert.Equal(t, metav1.ConditionFalse, c.Status)
			assert.Equal(t, tc.reason, c.Reason)
			assert.Contains(t, c.Message, tc.phrase)
			for _, raw := range []string{"dial tcp", "connect:", "lookup", "malformed", "SSH-2.0", "banner-secret", "EOF", err.Error()} {
				assert.NotContains(t, c.Message, raw)
			}
			for _, e := range statusEvents(nil, st.Conditions) {
				assert.NotContains(t, e.note, "dial tcp")
				assert.NotContains(t, e.note, "banner-secret")
			}
		})
	}
}

// TestManagerProbesOnlyAllowedUpstreams, on the real API server: the manager does not ask
// a mirror's upstream on its own host, and says so in the status and an Event without the
// error's text, until an admin allows loopback; then it asks and finds it reachable.
func TestManagerProbesOnlyAllowedUpstreams(t *testing.T) {
	env.Require(t)
	ctx := context.Background()
	ns := newNamespace(t)
	upstream, hits := countingServer(t, http.StatusUnauthorized)
	shared := scope.Namespaces{Watched: []string{ns}}
	opts := Options{MaxConcurrentReconciles: 2, Probes: true}
	stop := testenv.StartManager(t, env.Config, shared, opts.Setup)

	m := newMirror(ns, "local", upstream.URL, "")
	require.NoError(t, env.Client.Create(ctx, m))
	key := client.ObjectKeyFromObject(m)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		m = getMirror(c, key)
		up := condition(m, mirrorsv1alpha1.ConditionUpstreamReachable)
		assert.Equal(c, metav1.ConditionFalse, up.Status, up.Message)
		assert.Equal(c, mirrorsv1alpha1.ReasonAddressRefused, up.Reason, up.Message)
		assert.Equal(c, 1, eventCounts(c, m)["Warning/UpstreamAddressRefused"])
	}, wait, tick)
	up := condition(m, mirrorsv1alpha1.ConditionUpstreamReachable)
	assert.Contains(t, up.Message, egress.PhraseAddressRefused)
	assert.NotContains(t, up.Message, "dial tcp")
	assert.Equal(t, metav1.ConditionFalse, condition(m, mirrorsv1alpha1.ConditionReady).Status)
	for _, e := range testenv.Events(t, env.Client, ns, "RegistryMirror", m.Name) {
		assert.NotContains(t, e.Note, "dial tcp")
	}
	assert.Equal(t, int32(0), hits.Load(), "the upstream on loopback was not asked")
	stop()

	opts.ProbeAllowedCIDRs = "127.0.0.0/8"
	testenv.StartManager(t, env.Config, shared, opts.Setup)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		up := condition(getMirror(c, key), mirrorsv1alpha1.ConditionUpstreamReachable)
		assert.Equal(c, metav1.ConditionTrue, up.Status, up.Message)
		assert.Equal(c, mirrorsv1alpha1.ReasonReachable, up.Reason, up.Message)
	}, wait, tick)
	assert.Positive(t, hits.Load(), "with 127.0.0.0/8 allowed the upstream was asked")
}
