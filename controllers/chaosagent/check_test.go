package chaosagent

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	blackadderv1beta1 "github.com/quartet-operator/quartet/api/blackadder/v1beta1"
	"github.com/quartet-operator/quartet/internal/egress"
)

// loopback lets tests reach their own servers.
var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}

// testChecker is the manager's checker without the proxy the test's environment may name.
func testChecker(allowed []netip.Prefix) HTTPChecker {
	c := NewHTTPChecker(clock.RealClock{}, allowed).(*httpChecker)
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
