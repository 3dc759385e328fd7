package egress

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The RegistryMirror's probe tests (controllers/registrymirror) cover the rule and the
// phrases case by case through this package; these tests hold the package to its contract
// on its own.

var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}

func TestAddressAllowed(t *testing.T) {
	for addr, want := range map[string]bool{
		"10.96.0.10": true, "192.168.1.1": true, "fd12::1": true, "8.8.8.8": true,
		"127.0.0.1": false, "::1": false, "169.254.169.254": false, "fe80::1": false,
		"fd00:ec2::254": false, "100.100.100.200": false, "0.0.0.0": false, "224.0.0.1": false,
		"::ffff:127.0.0.1": false,
	} {
		assert.Equal(t, want, AddressAllowed(netip.MustParseAddr(addr), nil), addr)
	}
	assert.True(t, AddressAllowed(netip.MustParseAddr("127.0.0.1"), loopback))
	assert.False(t, AddressAllowed(netip.MustParseAddr("169.254.169.254"), loopback))
	assert.ErrorIs(t, CheckAddress("169.254.169.254:80", nil), ErrAddressRefused)
	assert.ErrorIs(t, CheckAddress("metadata.internal:80", nil), ErrAddressRefused, "only IP addresses are dialed")
	assert.NoError(t, CheckAddress("10.0.0.1:443", nil))
}

func TestParseCIDRs(t *testing.T) {
	got, err := ParseCIDRs("some-flag", " 127.0.0.1/8, ,::1/128")
	require.NoError(t, err)
	assert.Equal(t, []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}, got)
	got, err = ParseCIDRs("some-flag", "")
	require.NoError(t, err)
	assert.Empty(t, got)
	_, err = ParseCIDRs("some-flag", "127.0.0.1")
	assert.EqualError(t, err, `--some-flag: "127.0.0.1" is not a CIDR (like 127.0.0.0/8 or fd00::/8)`)
}

func TestGet(t *testing.T) {
	var hits atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { hits.Add(1) }))
	t.Cleanup(target.Close)
	redirect := httptest.NewServer(http.RedirectHandler(strings.Replace(target.URL, "127.0.0.1", "localhost", 1), http.StatusFound))
	t.Cleanup(redirect.Close)
	client := func(allowed []netip.Prefix) *http.Client {
		c := NewClient(time.Second, allowed)
		c.Transport.(*http.Transport).Proxy = nil
		return c
	}
	ctx := context.Background()

	_, err := Get(ctx, client(nil), nil, target.URL, time.Second)
	require.ErrorIs(t, err, ErrAddressRefused)
	assert.Equal(t, PhraseAddressRefused, Failure(err))
	code, err := Get(ctx, client(loopback), loopback, redirect.URL, time.Second)
	require.NoError(t, err)
	assert.Equal(t, http.StatusFound, code, "a redirect is the answer")
	assert.Zero(t, hits.Load(), "and it is not followed")
	code, err = Get(ctx, client(loopback), loopback, target.URL, time.Second)
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, code)

	// An address that would go to a proxy is checked before the proxy is asked.
	proxied := client(loopback)
	proxyURL, _ := url.Parse(target.URL)
	proxied.Transport.(*http.Transport).Proxy = http.ProxyURL(proxyURL)
	_, err = Get(ctx, proxied, loopback, "http://169.254.169.254/latest/meta-data", time.Second)
	assert.ErrorIs(t, err, ErrAddressRefused)
	assert.EqualValues(t, 1, hits.Load(), "the proxy was not asked")

	assert.Equal(t, PhraseErrorStatus, Failure(StatusError{Code: 503}))
}
