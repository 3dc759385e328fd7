package registrymirror

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"syscall"
)

// metadataAddresses are the cloud instance metadata endpoints. 169.254.169.254 is
// link-local anyway; fd00:ec2::254 (AWS over IPv6) lies in fc00::/7 and 100.100.100.200
// (Alibaba Cloud) in 100.64.0.0/10, ranges the probes may otherwise reach.
var metadataAddresses = []netip.Addr{
	netip.MustParseAddr("169.254.169.254"),
	netip.MustParseAddr("fd00:ec2::254"),
	netip.MustParseAddr("100.100.100.200"),
}

// thisNetwork is 0.0.0.0/8: Linux connects 0.0.0.0 to the host itself.
var thisNetwork = netip.MustParsePrefix("0.0.0.0/8")

// errAddressRefused is what a probe returns when its upstream's address may not be dialed.
var errAddressRefused = errors.New("address not allowed for probes")

// addressRefusedError names the refused address, for the manager's log only.
type addressRefusedError struct{ addr netip.Addr }

func (e addressRefusedError) Error() string {
	return fmt.Sprintf("%v: %s (loopback, link-local, unspecified, multicast or metadata; see --registrymirror-probe-allowed-cidrs)", errAddressRefused, e.addr)
}

func (e addressRefusedError) Is(target error) bool { return target == errAddressRefused }

// probeAddressAllowed says whether a probe may connect to ip. Loopback, link-local
// (169.254.0.0/16, fe80::/10), unspecified (0.0.0.0/8, ::), multicast and the cloud
// metadata addresses are refused: a namespace's editor names the upstream, and the
// manager must not become their way into the node, its pod's own ports or the cloud's
// credentials. Private ranges stay allowed, as internal registries live there. A range
// in allowed lets its addresses through even when they would be refused.
func probeAddressAllowed(ip netip.Addr, allowed []netip.Prefix) bool {
	// An IPv4-mapped IPv6 address reaches the IPv4 one; a zone would make every
	// Prefix.Contains false.
	ip = ip.Unmap().WithZone("")
	for _, p := range allowed {
		if p.Contains(ip) {
			return true
		}
	}
	switch {
	case !ip.IsValid(), ip.IsLoopback(), ip.IsLinkLocalUnicast(), ip.IsMulticast(), ip.IsUnspecified(), thisNetwork.Contains(ip):
		return false
	}
	for _, m := range metadataAddresses {
		if ip == m {
			return false
		}
	}
	return true
}

// checkProbeAddress refuses an address ("ip:port", as net.Dialer hands it to
// ControlContext) that probeAddressAllowed refuses, and anything that is not an IP.
func checkProbeAddress(address string, allowed []netip.Prefix) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: %q is not an IP address and port", errAddressRefused, address)
	}
	if !probeAddressAllowed(ap.Addr(), allowed) {
		return addressRefusedError{ap.Addr()}
	}
	return nil
}

// probeDialControl is the probes' net.Dialer.ControlContext: it runs after the name is
// resolved and before each connect, on the very address about to be dialed, so a name
// that resolves to an allowed address when looked at and to a refused one when dialed
// (DNS rebinding) is still refused.
func probeDialControl(allowed []netip.Prefix) func(context.Context, string, string, syscall.RawConn) error {
	return func(_ context.Context, _, address string, _ syscall.RawConn) error {
		return checkProbeAddress(address, allowed)
	}
}
