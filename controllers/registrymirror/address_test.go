package registrymirror

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestProbeAddressAllowed(t *testing.T) {
	loopback := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
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
		assert.Equal(t, tc.want, probeAddressAllowed(netip.MustParseAddr(tc.addr), tc.allowed), "%s allowed %v", tc.addr, tc.allowed)
	}
	assert.False(t, probeAddressAllowed(netip.Addr{}, nil), "the zero address")
}

func TestCheckProbeAddress(t *testing.T) {
	loopback := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
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
		{"registry.local:5000", nil, true},
		{"10.0.0.7", nil, true},
	} {
		err := checkProbeAddress(tc.address, tc.allowed)
		if !tc.refused {
			assert.NoError(t, err, tc.address)
			continue
		}
		assert.ErrorIs(t, err, errAddressRefused, tc.address)
		assert.Equal(t, phraseAddressRefused, probeFailure(err), tc.address)
	}
	assert.ErrorContains(t, checkProbeAddress("169.254.169.254:80", nil), "169.254.169.254", "the log names the address")
}
