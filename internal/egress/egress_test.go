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

// The rule for addresses a custom resource names, case by case, and the package's contract.

var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}

func TestAddressAllowed(t *testing.T) {
	linkLocal := []netip.Prefix{netip.MustParsePrefix("169.254.0.0/16")}
	for _, tc := range []struct {
		addr    string
		allowed []netip.Prefix
		want    bool
	}{
		// Where internal and public registries live.
		{"10.213.0.2", nil, true},
		{"172.16.5.4", nil, true},
		{"192.168.1.10", nil, true},
		{"fd12:3456::1", nil, true},
		{"100.64.0.1", nil, true},
		{"8.8.8.8", nil, true},
		{"2606:4700::1111", nil, true},
		// The manager's own host and pod, the node's link, the cloud's metadata.
		{"127.0.0.1", nil, false},
		{"127.53.0.1", nil, false},
		{"::1", nil, false},
		{"::ffff:127.0.0.1", nil, false},
		{"169.254.169.254", nil, false},
		{"169.254.20.10", nil, false},
		{"::ffff:169.254.169.254", nil, false},
		{"fe80::1", nil, false},
		{"fe80::1%eth0", nil, false},
		{"fd00:ec2::254", nil, false},
		{"100.100.100.200", nil, false},
		{"0.0.0.0", nil, false},
		{"0.1.2.3", nil, false},
		{"::", nil, false},
		{"224.0.0.1", nil, false},
		{"ff02::1", nil, false},
		// What an admin lets through.
		{"127.0.0.1", loopback, true},
		{"::ffff:127.0.0.1", loopback, true},
		{"::1", loopback, false},
		{"169.254.169.254", loopback, false},
		{"169.254.169.254", linkLocal, true},
		{"fd00:ec2::254", []netip.Prefix{netip.MustParsePrefix("fd00:ec2::254/128")}, true},
	} {
		assert.Equal(t, tc.want, AddressAllowed(netip.MustParseAddr(tc.addr), tc.allowed), "%s allowed %v", tc.addr, tc.allowed)
	}
	assert.False(t, AddressAllowed(netip.Addr{}, nil), "the zero address")
}

func TestCheckAddress(t *testing.T) {
	for _, tc := range []struct {
		address string
		allowed []netip.Prefix
		refused bool
	}{
		{"10.0.0.7:5000", nil, false},
		{"[fd12::7]:443", nil, false},
		{"127.0.0.1:5000", nil, true},
		{"127.0.0.1:5000", loopback, false},
		{"[fe80::1%eth0]:80", nil, true},
		{"169.254.169.254:80", loopback, true},
		{"registry.local:5000", nil, true}, // only IP addresses are dialed
		{"10.0.0.7", nil, true},
	} {
		err := CheckAddress(tc.address, tc.allowed)
		if !tc.refused {
			assert.NoError(t, err, tc.address)
			continue
		}
		assert.ErrorIs(t, err, ErrAddressRefused, tc.address)
		assert.Equal(t, PhraseAddressRefused, Failure(err), tc.address)
	}
	assert.ErrorContains(t, CheckAddress("169.254.169.254:80", nil), "169.254.169.254", "the log names the address")
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
