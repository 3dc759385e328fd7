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
	"slices"
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
	return fmt.Sprintf("%v: %s (loopback, link-local, unspecified, multicast or metadata, or an IPv6 address that carries such an IPv4 address; a manager flag can allow its range)", ErrAddressRefused, e.Addr)
}

// Is makes errors.Is(err, ErrAddressRefused) true.
func (e AddressRefusedError) Is(target error) bool { return target == ErrAddressRefused }

// AddressAllowed says whether the manager may connect to ip. Loopback, link-local
// (169.254.0.0/16, fe80::/10), unspecified (0.0.0.0/8, ::), multicast and the cloud
// metadata addresses are refused: the author of a resource names the address, and the
// manager must not become their way into the node, its pod's own ports or the cloud's
// credentials. Private ranges stay allowed, as internal services live there. An IPv6
// address that carries an IPv4 one to an IPv4 host (embeddedIPv4: NAT64, SIIT,
// IPv4-compatible, 6to4, Teredo, ISATAP) is refused when any IPv4 address it may carry is.
// A range in allowed lets its addresses through even when they would be refused, the
// IPv4 addresses carried included.
func AddressAllowed(ip netip.Addr, allowed []netip.Prefix) bool {
	// An IPv4-mapped IPv6 address reaches the IPv4 one; a zone would make every
	// Prefix.Contains false.
	ip = ip.Unmap().WithZone("")
	if inAny(allowed, ip) {
		return true
	}
	return ruleAllows(ip) && !slices.ContainsFunc(embeddedIPv4(ip), func(v4 netip.Addr) bool {
		return !inAny(allowed, v4) && !ruleAllows(v4)
	})
}

func inAny(allowed []netip.Prefix, ip netip.Addr) bool {
	return slices.ContainsFunc(allowed, func(p netip.Prefix) bool { return p.Contains(ip) })
}

// ruleAllows is the rule for the address itself (AddressAllowed).
func ruleAllows(ip netip.Addr) bool {
	switch {
	case !ip.IsValid(), ip.IsLoopback(), ip.IsLinkLocalUnicast(), ip.IsMulticast(), ip.IsUnspecified(), thisNetwork.Contains(ip):
		return false
	}
	return !slices.Contains(metadataAddresses, ip)
}

// Prefixes of IPv6 addresses that carry an IPv4 address. (net/netip knows only the
// IPv4-mapped ::ffff:0:0/96, which Unmap turns into the IPv4 address.)
var (
	nat64WellKnown   = netip.MustParsePrefix("64:ff9b::/96")    // RFC 6052
	nat64LocalUse    = netip.MustParsePrefix("64:ff9b:1::/48")  // RFC 8215
	ipv4Translated   = netip.MustParsePrefix("::ffff:0:0:0/96") // SIIT, RFC 2765
	ipv4Compatible   = netip.MustParsePrefix("::/96")           // RFC 4291, deprecated
	sixToFour        = netip.MustParsePrefix("2002::/16")       // RFC 3056
	teredo           = netip.MustParsePrefix("2001::/32")       // RFC 4380
	isatapIdentifier = [4]byte{0x00, 0x00, 0x5e, 0xfe}          // RFC 5214, bits 64-95
)

// embeddedIPv4 returns the IPv4 addresses a packet to ip may reach through a translator,
// relay or tunnel that takes them from the address, by the standard layouts:
//   - NAT64's well-known prefix 64:ff9b::/96, SIIT's ::ffff:0:a.b.c.d and the deprecated
//     IPv4-compatible ::a.b.c.d: the last 32 bits;
//   - NAT64's local-use prefix 64:ff9b:1::/48: its operator may use a /48, /56, /64 or
//     /96 within it (RFC 6052's layouts: the IPv4 address after the prefix, around the
//     zero bits 64-71), and the address does not say which, so every layout's reading
//     but those in 0.0.0.0/8: that is what the zero bits of another layout read as, and
//     0.0.0.0/8 is refused as the manager's own host, which a translator's is not. An
//     address is refused that a layout its operator does not use reads as a refused one
//     (an operator prefix 64:ff9b:1:7f00::/96 reads as 127.0.x.x at /48): an admin
//     allows the prefix with the manager's flag;
//   - 6to4 2002::/16: bits 16-47;
//   - Teredo 2001::/32: the server in bits 32-63, the client in the last 32 bits,
//     inverted;
//   - ISATAP, under any /64: an interface identifier 0000:5efe or 0200:5efe (the u and g
//     bits aside), then the IPv4 address.
//
// A NAT64 prefix an operator chose outside 64:ff9b::/32 cannot be told from any other
// IPv6 address: its translator's own rules apply (docs/SECURITY.md).
func embeddedIPv4(ip netip.Addr) []netip.Addr {
	if !ip.Is6() {
		return nil
	}
	b := ip.As16()
	v4 := func(i, j, k, l int) netip.Addr { return netip.AddrFrom4([4]byte{b[i], b[j], b[k], b[l]}) }
	last := v4(12, 13, 14, 15)
	var out []netip.Addr
	switch {
	case nat64WellKnown.Contains(ip), ipv4Translated.Contains(ip), ipv4Compatible.Contains(ip):
		out = append(out, last)
	case nat64LocalUse.Contains(ip):
		for _, r := range []netip.Addr{last, v4(9, 10, 11, 12), v4(7, 9, 10, 11), v4(6, 7, 9, 10)} { // /96, /64, /56, /48
			if !thisNetwork.Contains(r) {
				out = append(out, r)
			}
		}
	case sixToFour.Contains(ip):
		out = append(out, v4(2, 3, 4, 5))
	case teredo.Contains(ip):
		out = append(out, v4(4, 5, 6, 7), netip.AddrFrom4([4]byte{^b[12], ^b[13], ^b[14], ^b[15]}))
	}
	if b[8]&^0x03 == isatapIdentifier[0] && b[9] == isatapIdentifier[1] && b[10] == isatapIdentifier[2] && b[11] == isatapIdentifier[3] {
		out = append(out, last)
	}
	return out
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
