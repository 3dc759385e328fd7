package egress

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"time"
)

// maxBody is how much of an answer's body is read (and thrown away) so that the
// connection can be reused.
const maxBody = 64 << 10

// NewClient returns an HTTP client with the manager's trust store that follows no
// redirect (a redirect is an answer: following it would take the manager wherever the
// other end points, and a public name can point at an internal service) and never
// connects to an address AddressAllowed refuses, unless it lies in one of the allowed
// ranges. timeout bounds each request, connection and TLS handshake included.
//
// A proxy from HTTPS_PROXY or HTTP_PROXY is dialed under the same rule (one on loopback
// needs its range allowed); the proxy then resolves the target's name and decides what it
// reaches, so only a target written as an IP address is checked before it is asked (Get).
func NewClient(timeout time.Duration, allowed []netip.Prefix) *http.Client {
	dialer := &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second, ControlContext: DialControl(allowed)}
	return &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			Proxy:       http.ProxyFromEnvironment,
			DialContext: dialer.DialContext,
			// As http.DefaultTransport: a DialContext of its own would turn HTTP/2 off.
			ForceAttemptHTTP2:     true,
			TLSHandshakeTimeout:   timeout,
			ResponseHeaderTimeout: timeout,
			MaxIdleConnsPerHost:   2,
			IdleConnTimeout:       90 * time.Second,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// Get sends GET rawURL through c (made by NewClient with the same allowed ranges) within
// timeout and returns the answer's status code. The body is read up to 64 KiB and
// discarded.
func Get(ctx context.Context, c *http.Client, allowed []netip.Prefix, rawURL string, timeout time.Duration) (int, error) {
	code, _, err := GetBody(ctx, c, allowed, rawURL, timeout)
	if code != 0 {
		return code, nil // an answer, even if its body broke off
	}
	return 0, err
}

// GetBody is Get, and returns the body's first 64 KiB too; a body that breaks off is an
// error, with the status code.
func GetBody(ctx context.Context, c *http.Client, allowed []netip.Prefix, rawURL string, timeout time.Duration) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return 0, nil, err
	}
	// The dialer checks every address it connects to; this catches an IP address that
	// would go to a proxy instead.
	if ip, err := netip.ParseAddr(req.URL.Hostname()); err == nil && !AddressAllowed(ip, allowed) {
		return 0, nil, &url.Error{Op: "Get", URL: rawURL, Err: AddressRefusedError{ip}}
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return resp.StatusCode, nil, err
	}
	return resp.StatusCode, body, nil
}
