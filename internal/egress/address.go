// Package egress is how the manager dials addresses that a custom resource names: a
// RegistryMirror's upstream, a ChaosAgent's HTTP guard. The people who write those
// resources choose where the manager connects, so every connection goes through one rule
// (AddressAllowed), redirects are never followed, and what the status says about a failure
// is a fixed phrase (Failure), never the error's text.
package egress

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"syscall"
)

// metadataAddresses are the cloud instance metadata endpoints. 169.254.169.254 is
// link-local anyway; fd00:ec2::254 (AWS over IPv6) lies in fc00::/7 and 100.100.100.200
// (Alibaba Cloud) in 100.64.0.0/10, ranges the manager may otherwise reach.
var metadataAddresses = []netip.Addr{
	netip.MustParseAddr("169.254.169.254"),
	netip.MustParseAddr("fd00:ec2::254"),
	netip.MustParseAddr("100.100.100.200"),
}

// thisNetwork is 0.0.0.0/8: Linux connects 0.0.0.0 to the host itself.
var thisNetwork = netip.MustParsePrefix("0.0.0.0/8")

// ErrAddressRefused is what a request returns when its address may not be dialed.
var ErrAddressRefused = errors.New("address not allowed")

// AddressRefusedError names the refused address, for the manager's log only.
type AddressRefusedError struct{ Addr netip.Addr }

func (e AddressRefusedError) Error() string {
	return fmt.Sprintf("%v: %s (loopback, link-local, unspecified, multicast or metadata; a manager flag can allow its range)", ErrAddressRefused, e.Addr)
}

// Is makes errors.Is(err, ErrAddressRefused) true.
func (e AddressRefusedError) Is(target error) bool { return target == ErrAddressRefused }

// AddressAllowed says whether the manager may connect to ip. Loopback, link-local
// (169.254.0.0/16, fe80::/10), unspecified (0.0.0.0/8, ::), multicast and the cloud
// metadata addresses are refused: the author of a resource names the address, and the
// manager must not become their way into the node, its pod's own ports or the cloud's
// credentials. Private ranges stay allowed, as internal services live there. A range in
// allowed lets its addresses through even when they would be refused.
func AddressAllowed(ip netip.Addr, allowed []netip.Prefix) bool {
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

// CheckAddress refuses an address ("ip:port", as net.Dialer hands it to ControlContext)
// that AddressAllowed refuses, and anything that is not an IP.
func CheckAddress(address string, allowed []netip.Prefix) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: %q is not an IP address and port", ErrAddressRefused, address)
	}
	if !AddressAllowed(ap.Addr(), allowed) {
		return AddressRefusedError{ap.Addr()}
	}
	return nil
}

// DialControl is a net.Dialer.ControlContext: it runs after the name is resolved and
// before each connect, on the very address about to be dialed, so a name that resolves to
// an allowed address when looked at and to a refused one when dialed (DNS rebinding) is
// still refused.
func DialControl(allowed []netip.Prefix) func(context.Context, string, string, syscall.RawConn) error {
	return func(_ context.Context, _, address string, _ syscall.RawConn) error {
		return CheckAddress(address, allowed)
	}
}

// ParseCIDRs parses a comma-separated list of CIDRs (a manager flag's value); flag names
// the flag in the error.
func ParseCIDRs(flag, list string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range strings.Split(list, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("--%s: %q is not a CIDR (like 127.0.0.0/8 or fd00::/8)", flag, s)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}
