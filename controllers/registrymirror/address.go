package registrymirror

import (
	"net/netip"

	"github.com/quartet-operator/quartet/internal/egress"
)

// The probes dial under the manager's one rule for addresses a custom resource names
// (internal/egress, shared with the ChaosAgent's HTTP guards); these names keep the
// probes' code and tests reading as before.

// errAddressRefused is what a probe returns when its upstream's address may not be dialed.
var errAddressRefused = egress.ErrAddressRefused

// addressRefusedError names the refused address, for the manager's log only.
type addressRefusedError = egress.AddressRefusedError

// probeAddressAllowed says whether a probe may connect to ip (egress.AddressAllowed):
// loopback, link-local, unspecified, multicast and cloud metadata addresses are refused
// unless they lie in allowed (--registrymirror-probe-allowed-cidrs); private ranges, where
// internal registries live, are allowed.
func probeAddressAllowed(ip netip.Addr, allowed []netip.Prefix) bool {
	return egress.AddressAllowed(ip, allowed)
}

// checkProbeAddress refuses an address ("ip:port") that probeAddressAllowed refuses, and
// anything that is not an IP.
func checkProbeAddress(address string, allowed []netip.Prefix) error {
	return egress.CheckAddress(address, allowed)
}
