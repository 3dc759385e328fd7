package chaosagent

import (
	"context"
	"errors"
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
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	blackadderv1beta1 "github.com/quartet-operator/quartet/api/blackadder/v1beta1"
	"github.com/quartet-operator/quartet/internal/egress"
)

func guardedDeployment(replicas *int32, ready int32, original string) *appsv1.Deployment {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}}
	d.Spec.Replicas = replicas
	d.Status.ReadyReplicas = ready
	if original != "" {
		d.Annotations = map[string]string{AnnotationOriginalReplicas: original}
	}
	return d
}

func TestEvaluateDeploymentGuard(t *testing.T) {
	guard := func(floor intstr.IntOrString) blackadderv1beta1.DeploymentGuard {
		return blackadderv1beta1.DeploymentGuard{Namespace: "shop", Name: "web", MinReady: floor}
	}
	count, pct := intstr.FromInt32, intstr.FromString
	for _, tc := range []struct {
		name    string
		guard   blackadderv1beta1.DeploymentGuard
		seen    deploymentSeen
		reason  string
		message string
	}{
		{"at the floor holds", guard(count(2)), deploymentSeen{Deployment: guardedDeployment(ptr.To[int32](3), 2, "")},
			blackadderv1beta1.GuardReasonPassed, "Deployment shop/web has 2 ready replica(s), floor 2"},
		{"below the floor trips", guard(count(2)), deploymentSeen{Deployment: guardedDeployment(ptr.To[int32](3), 1, "")},
			blackadderv1beta1.GuardReasonDeploymentBelowFloor, "Deployment shop/web has 1 ready replica(s), below its floor of 2"},
		{"75% of 3 is rounded up to 3", guard(pct("75%")), deploymentSeen{Deployment: guardedDeployment(ptr.To[int32](3), 2, "")},
			blackadderv1beta1.GuardReasonDeploymentBelowFloor, "Deployment shop/web has 2 ready replica(s), below its floor of 3 (75% of 3)"},
		{"50% of 3 is 2", guard(pct("50%")), deploymentSeen{Deployment: guardedDeployment(ptr.To[int32](3), 2, "")},
			blackadderv1beta1.GuardReasonPassed, "Deployment shop/web has 2 ready replica(s), floor 2 (50% of 3)"},
		{"a percentage is of the replicas before cancer doubled them", guard(pct("100%")),
			deploymentSeen{Deployment: guardedDeployment(ptr.To[int32](4), 2, "2")},
			blackadderv1beta1.GuardReasonPassed, "Deployment shop/web has 2 ready replica(s), floor 2 (100% of 2)"},
		{"unset replicas count as 1", guard(pct("100%")), deploymentSeen{Deployment: guardedDeployment(nil, 0, "")},
			blackadderv1beta1.GuardReasonDeploymentBelowFloor, "Deployment shop/web has 0 ready replica(s), below its floor of 1 (100% of 1)"},
		{"a hand-edited original is ignored", guard(pct("100%")), deploymentSeen{Deployment: guardedDeployment(ptr.To[int32](2), 2, "many")},
			blackadderv1beta1.GuardReasonPassed, "Deployment shop/web has 2 ready replica(s), floor 2 (100% of 2)"},
		{"scaled to zero by its owner trips a count", guard(count(1)), deploymentSeen{Deployment: guardedDeployment(ptr.To[int32](0), 0, "")},
			blackadderv1beta1.GuardReasonDeploymentBelowFloor, "Deployment shop/web has 0 ready replica(s), below its floor of 1"},
		{"not found trips", guard(count(1)), deploymentSeen{}, blackadderv1beta1.GuardReasonDeploymentNotFound, "Deployment shop/web not found"},
		{"not watched trips", guard(count(1)), deploymentSeen{NotWatched: true}, blackadderv1beta1.GuardReasonDeploymentNotWatched,
			"Deployment shop/web is in a namespace the operator does not watch"},
		{"an unreadable cache trips", guard(count(1)), deploymentSeen{Err: errors.New("timed out waiting for cache")}, blackadderv1beta1.GuardReasonDeploymentUnreadable,
			"Deployment shop/web could not be read from the manager's cache"},
		{"a floor the CRD refuses trips", guard(pct("most")), deploymentSeen{Deployment: guardedDeployment(ptr.To[int32](3), 3, "")},
			blackadderv1beta1.GuardReasonDeploymentBelowFloor, "Deployment shop/web: minReady most is not a count or a percentage"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reason, message, failed := evaluateDeploymentGuard(tc.guard, tc.seen)
			assert.Equal(t, tc.reason, reason)
			assert.Equal(t, tc.message, message)
			assert.Equal(t, tc.reason != blackadderv1beta1.GuardReasonPassed, failed)
		})
	}
}

func TestEvaluateHTTPGuard(t *testing.T) {
	const u = "http://web.shop.svc/healthz"
	dial := func(err error) error {
		return &url.Error{Op: "Get", URL: u, Err: &net.OpError{Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.ParseIP("10.96.0.7"), Port: 80}, Err: err}}
	}
	for _, tc := range []struct {
		name    string
		guard   blackadderv1beta1.HTTPGuard
		seen    httpSeen
		reason  string
		message string
	}{
		{"200 by default", blackadderv1beta1.HTTPGuard{URL: u}, httpSeen{Status: 200, Latency: 12 * time.Millisecond},
			blackadderv1beta1.GuardReasonPassed, "GET http://web.shop.svc/healthz answered 200 in 12ms"},
		{"another status trips", blackadderv1beta1.HTTPGuard{URL: u, ExpectedStatus: 200}, httpSeen{Status: 503, Latency: 3 * time.Millisecond},
			blackadderv1beta1.GuardReasonHTTPUnexpectedStatus, "GET http://web.shop.svc/healthz answered 503 in 3ms, expected 200"},
		{"a redirect is an answer, not followed", blackadderv1beta1.HTTPGuard{URL: u, ExpectedStatus: 200}, httpSeen{Status: 302, Latency: time.Millisecond},
			blackadderv1beta1.GuardReasonHTTPUnexpectedStatus, "GET http://web.shop.svc/healthz answered 302 in 1ms, expected 200"},
		{"the expected status may be anything", blackadderv1beta1.HTTPGuard{URL: u, ExpectedStatus: 204}, httpSeen{Status: 204},
			blackadderv1beta1.GuardReasonPassed, "GET http://web.shop.svc/healthz answered 204 in 0s"},
		{"in time", blackadderv1beta1.HTTPGuard{URL: u, MaxLatencyMilliseconds: ptr.To[int32](500)}, httpSeen{Status: 200, Latency: 500 * time.Millisecond},
			blackadderv1beta1.GuardReasonPassed, "GET http://web.shop.svc/healthz answered 200 in 500ms"},
		{"too slow trips", blackadderv1beta1.HTTPGuard{URL: u, MaxLatencyMilliseconds: ptr.To[int32](500)}, httpSeen{Status: 200, Latency: 1200 * time.Millisecond},
			blackadderv1beta1.GuardReasonHTTPTooSlow, "GET http://web.shop.svc/healthz answered 200 in 1.2s, more than 500ms"},
		{"no answer trips with a fixed phrase", blackadderv1beta1.HTTPGuard{URL: u}, httpSeen{Err: dial(os.NewSyscallError("connect", syscall.ECONNREFUSED))},
			blackadderv1beta1.GuardReasonHTTPFailed, "GET http://web.shop.svc/healthz: connection refused"},
		{"a timeout", blackadderv1beta1.HTTPGuard{URL: u}, httpSeen{Err: &url.Error{Op: "Get", URL: u, Err: context.DeadlineExceeded}},
			blackadderv1beta1.GuardReasonHTTPFailed, "GET http://web.shop.svc/healthz: timed out"},
		{"a refused address", blackadderv1beta1.HTTPGuard{URL: "http://169.254.169.254/latest"},
			httpSeen{Err: &url.Error{Op: "Get", URL: u, Err: egress.AddressRefusedError{Addr: netip.MustParseAddr("169.254.169.254")}}},
			blackadderv1beta1.GuardReasonHTTPAddressRefused, "GET http://169.254.169.254/latest not sent: address not allowed for probes (loopback, link-local or metadata); " +
				"a cluster admin can allow its range with --chaosagent-guard-allowed-cidrs"},
		{"a banner stays out of the message", blackadderv1beta1.HTTPGuard{URL: u},
			httpSeen{Err: &url.Error{Op: "Get", URL: u, Err: errors.New(`malformed HTTP response "SSH-2.0-OpenSSH_9.6 internal-secret"`)}},
			blackadderv1beta1.GuardReasonHTTPFailed, "GET http://web.shop.svc/healthz: the answer was not HTTP"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reason, message, failed := evaluateHTTPGuard(tc.guard, tc.seen)
			assert.Equal(t, tc.reason, reason)
			assert.Equal(t, tc.message, message)
			assert.Equal(t, tc.reason != blackadderv1beta1.GuardReasonPassed, failed)
			assert.NotContains(t, message, "10.96.0.7", "no dial details")
			assert.NotContains(t, message, "internal-secret")
		})
	}
}

func TestGuardOrderChecksDeploymentsFirst(t *testing.T) {
	h := func(name string) blackadderv1beta1.SteadyStateGuard {
		return blackadderv1beta1.SteadyStateGuard{Name: name, HTTP: &blackadderv1beta1.HTTPGuard{URL: "http://" + name}}
	}
	d := func(name string) blackadderv1beta1.SteadyStateGuard {
		return blackadderv1beta1.SteadyStateGuard{Name: name, Deployment: &blackadderv1beta1.DeploymentGuard{Namespace: "a", Name: name}}
	}
	names := func(gs []blackadderv1beta1.SteadyStateGuard) []string {
		var out []string
		for _, g := range gs {
			out = append(out, g.Name)
		}
		return out
	}
	in := []blackadderv1beta1.SteadyStateGuard{h("h1"), d("d1"), h("h2"), d("d2")}
	assert.Equal(t, []string{"d1", "d2", "h1", "h2"}, names(guardOrder(in)))
	assert.Equal(t, []string{"h1", "d1", "h2", "d2"}, names(in), "the spec is left as it is")
}

func TestFirstFailureAndResults(t *testing.T) {
	now := time.Date(2026, 11, 26, 10, 0, 0, 500, time.UTC)
	verdicts := []guardVerdict{
		{Name: "a", Reason: blackadderv1beta1.GuardReasonPassed, Message: "fine"},
		{Name: "b", Failed: true, Reason: blackadderv1beta1.GuardReasonHTTPUnexpectedStatus, Message: strings.Repeat("x", 600)},
		{Name: "c", Failed: true, Reason: blackadderv1beta1.GuardReasonHTTPFailed},
	}
	require.NotNil(t, firstFailure(verdicts))
	assert.Equal(t, "b", firstFailure(verdicts).Name)
	assert.Nil(t, firstFailure(verdicts[:1]))
	assert.Nil(t, firstFailure(nil))

	results := guardResults(verdicts[:2], now)
	require.Len(t, results, 2)
	assert.Equal(t, blackadderv1beta1.GuardPassed, results[0].Result)
	assert.Equal(t, blackadderv1beta1.GuardFailed, results[1].Result)
	assert.LessOrEqual(t, len(results[1].Message), 512, "fits the CRD's maxLength")
	assert.Equal(t, now.Truncate(time.Second), results[0].LastCheckTime.UTC())

	spec := []blackadderv1beta1.SteadyStateGuard{{Name: "b"}, {Name: "a"}, {Name: "new"}}
	merged := mergeGuardResults([]blackadderv1beta1.GuardResult{{Name: "a", Reason: "old"}, {Name: "gone"}}, results[1:], spec)
	assert.Equal(t, []blackadderv1beta1.GuardResult{results[1], {Name: "a", Reason: "old"}}, merged,
		"checked replace, unchecked kept, removed guards dropped, in the order of spec")
}

// loopback lets tests reach their own servers.
var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}

// testChecker is the manager's checker without the proxy the test's environment may name.
func testChecker(allowed []netip.Prefix) *HTTPChecker {
	c := NewHTTPChecker(clock.RealClock{}, allowed)
	c.client.Transport.(*http.Transport).Proxy = nil
	return c
}

// server answers with code after delay and counts requests.
func server(t *testing.T, code int, delay time.Duration) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var hits atomic.Int32
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
		}
		w.WriteHeader(code)
	}))
	t.Cleanup(s.Close)
	return s, &hits
}

// TestHTTPCheckerKeepsToTheManagersRules: a guard's request is refused on loopback unless a
// range allows it (by address or by a name that resolves there), follows no redirect, and
// its latency and timeout are the request's own.
func TestHTTPCheckerKeepsToTheManagersRules(t *testing.T) {
	ctx := context.Background()
	ok, okHits := server(t, http.StatusOK, 0)
	byName := strings.Replace(ok.URL, "127.0.0.1", "localhost", 1)

	for _, u := range []string{ok.URL, byName} {
		_, _, err := testChecker(nil).Get(ctx, u, time.Second)
		require.ErrorIs(t, err, egress.ErrAddressRefused, u)
		reason, _, failed := evaluateHTTPGuard(blackadderv1beta1.HTTPGuard{URL: u}, httpSeen{Err: err})
		assert.True(t, failed)
		assert.Equal(t, blackadderv1beta1.GuardReasonHTTPAddressRefused, reason)
	}
	assert.Zero(t, okHits.Load(), "no request reached loopback")
	for _, u := range []string{"http://169.254.169.254/latest/meta-data", "http://[fd00:ec2::254]/"} {
		_, _, err := testChecker(loopback).Get(ctx, u, time.Second)
		assert.ErrorIs(t, err, egress.ErrAddressRefused, "%s stays refused when loopback is allowed", u)
	}

	status, latency, err := testChecker(loopback).Get(ctx, ok.URL, time.Second)
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, status)
	assert.Less(t, latency, time.Second)
	assert.EqualValues(t, 1, okHits.Load())

	redirect := httptest.NewServer(http.RedirectHandler(byName+"/elsewhere", http.StatusFound))
	t.Cleanup(redirect.Close)
	status, _, err = testChecker(loopback).Get(ctx, redirect.URL, time.Second)
	require.NoError(t, err)
	assert.Equal(t, http.StatusFound, status, "the redirect is the answer")
	assert.EqualValues(t, 1, okHits.Load(), "the redirect was not followed")

	slow, _ := server(t, http.StatusOK, 300*time.Millisecond)
	status, latency, err = testChecker(loopback).Get(ctx, slow.URL, 5*time.Second)
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, status)
	assert.GreaterOrEqual(t, latency, 300*time.Millisecond, "latency is measured")
	reason, _, failed := evaluateHTTPGuard(blackadderv1beta1.HTTPGuard{URL: slow.URL, MaxLatencyMilliseconds: ptr.To[int32](100)}, httpSeen{Status: status, Latency: latency})
	assert.True(t, failed)
	assert.Equal(t, blackadderv1beta1.GuardReasonHTTPTooSlow, reason)

	hanging, _ := server(t, http.StatusOK, time.Minute)
	start := time.Now()
	_, _, err = testChecker(loopback).Get(ctx, hanging.URL, 200*time.Millisecond)
	require.Error(t, err)
	assert.Less(t, time.Since(start), 5*time.Second, "the guard's own timeout")
	assert.Equal(t, egress.PhraseTimedOut, egress.Failure(err))
}
