package egress

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestEmbeddedIPv4IsCheckedAsIPv4 (review 2026-12-06, finding 7): an IPv6 address that
// carries an IPv4 one to an IPv4 host (NAT64, SIIT, IPv4-compatible, 6to4, Teredo, ISATAP)
// is refused when the IPv4 address is; one that carries an allowed address stays allowed.
func TestEmbeddedIPv4IsCheckedAsIPv4(t *testing.T) {
	linkLocal := []netip.Prefix{netip.MustParsePrefix("169.254.0.0/16")}
	for _, tc := range []struct {
		name, addr string
		allowed    []netip.Prefix
		want       bool
	}{
		// NAT64, the well-known prefix 64:ff9b::/96 (RFC 6052): the last 32 bits.
		{"NAT64 metadata", "64:ff9b::a9fe:a9fe", nil, false},
		{"NAT64 metadata, dotted", "64:ff9b::169.254.169.254", nil, false},
		{"NAT64 loopback", "64:ff9b::127.0.0.1", nil, false},
		{"NAT64 Alibaba metadata", "64:ff9b::100.100.100.200", nil, false},
		{"NAT64 this network", "64:ff9b::0.0.0.0", nil, false},
		{"NAT64 multicast", "64:ff9b::224.0.0.1", nil, false},
		{"NAT64 public", "64:ff9b::8.8.8.8", nil, true},
		{"NAT64 private", "64:ff9b::10.0.0.1", nil, true},
		{"NAT64 metadata, link-local allowed", "64:ff9b::a9fe:a9fe", linkLocal, true},
		{"NAT64 metadata, the prefix allowed", "64:ff9b::a9fe:a9fe", []netip.Prefix{netip.MustParsePrefix("64:ff9b::/96")}, true},
		// NAT64, the local-use prefix 64:ff9b:1::/48 (RFC 8215): every layout of RFC 6052
		// an operator may use in it (/48, /56, /64, /96).
		{"local-use /96 metadata", "64:ff9b:1::a9fe:a9fe", nil, false},
		{"local-use /96 public", "64:ff9b:1::8.8.8.8", nil, true},
		{"local-use /96 private", "64:ff9b:1::10.1.2.3", nil, true},
		{"local-use /96 public, operator bits", "64:ff9b:1:ab:cd:ef:808:808", nil, true},
		{"local-use /64 metadata", "64:ff9b:1:0:a9:fea9:fe00:0", nil, false},
		{"local-use /64 metadata, suffix set", "64:ff9b:1:0:a9:fea9:fe12:3456", nil, false},
		{"local-use /64 public", "64:ff9b:1:0:8:808:800:0", nil, true},
		{"local-use /56 metadata", "64:ff9b:1:a9:fe:a9fe::", nil, false},
		{"local-use /56 loopback", "64:ff9b:1:7f:0:1::", nil, false},
		{"local-use /48 metadata", "64:ff9b:1:a9fe:a9:fe00::", nil, false},
		{"local-use /48 public", "64:ff9b:1:808:8:800::", nil, true},
		// SIIT's IPv4-translated addresses ::ffff:0:0/96 (RFC 2765).
		{"IPv4-translated metadata", "::ffff:0:a9fe:a9fe", nil, false},
		{"IPv4-translated public", "::ffff:0:808:808", nil, true},
		// IPv4-compatible ::a.b.c.d (RFC 4291, deprecated).
		{"IPv4-compatible metadata", "::169.254.169.254", nil, false},
		{"IPv4-compatible loopback", "::127.0.0.1", nil, false},
		{"IPv4-compatible public", "::8.8.8.8", nil, true},
		// 6to4 2002::/16 (RFC 3056): bits 16-47.
		{"6to4 metadata", "2002:a9fe:a9fe::1", nil, false},
		{"6to4 loopback", "2002:7f00:1::1", nil, false},
		{"6to4 public", "2002:808:808::1", nil, true},
		// Teredo 2001::/32 (RFC 4380): the server in bits 32-63, the client in the last 32
		// bits, inverted.
		{"Teredo client metadata", "2001:0:808:808::5601:5601", nil, false},
		{"Teredo server loopback", "2001:0:7f00:1::f7f7:f7f7", nil, false},
		{"Teredo, RFC 4380's example", "2001:0:4136:e378:8000:63bf:3fff:fdd2", nil, true},
		// ISATAP (RFC 5214): an interface identifier 0000:5efe or 0200:5efe, then the IPv4.
		{"ISATAP metadata", "2001:db8::5efe:a9fe:a9fe", nil, false},
		{"ISATAP, global bit, loopback", "2001:db8::200:5efe:7f00:1", nil, false},
		{"ISATAP public", "2001:db8::5efe:808:808", nil, true},
		// Neither: what the rule says of the IPv6 address alone.
		{"Cloudflare", "2606:4700::1111", nil, true},
		{"documentation prefix, not Teredo", "2001:db8::a9fe:a9fe", nil, true},
	} {
		assert.Equal(t, tc.want, AddressAllowed(netip.MustParseAddr(tc.addr), tc.allowed), "%s: %s allowed %v", tc.name, tc.addr, tc.allowed)
	}
	// As the dialer hands the address over, after resolving a name.
	assert.ErrorIs(t, CheckAddress("[64:ff9b::a9fe:a9fe]:80", nil), ErrAddressRefused)
	assert.NoError(t, CheckAddress("[64:ff9b::808:808]:443", nil))
}

// embeddings are the ways an IPv6 address may carry v4, each with the rest of the
// address taken from rest (the fuzzer's bytes), as far as the form leaves bits free.
func embeddings(v4 [4]byte, rest [16]byte) map[string]netip.Addr {
	out := map[string]netip.Addr{}
	put := func(name string, prefix []byte, at int, v []byte) {
		b := rest
		copy(b[:], prefix)
		copy(b[at:], v)
		out[name] = netip.AddrFrom16(b)
	}
	zero := make([]byte, 12)
	put("NAT64", append([]byte{0, 0x64, 0xff, 0x9b}, make([]byte, 8)...), 12, v4[:])
	put("IPv4-compatible", zero, 12, v4[:])
	put("IPv4-translated", append(make([]byte, 8), 0xff, 0xff, 0, 0), 12, v4[:])
	put("6to4", []byte{0x20, 0x02}, 2, v4[:])
	put("Teredo server", []byte{0x20, 0x01, 0, 0}, 4, v4[:])
	inverted := [4]byte{^v4[0], ^v4[1], ^v4[2], ^v4[3]}
	put("Teredo client", []byte{0x20, 0x01, 0, 0}, 12, inverted[:])
	isatap := rest
	copy(isatap[8:], []byte{rest[8] & 0x03, 0, 0x5e, 0xfe})
	copy(isatap[12:], v4[:])
	out["ISATAP"] = netip.AddrFrom16(isatap)
	// The local-use prefix's layouts: a reading in 0.0.0.0/8 is not asked to be refused,
	// as the zero bits of another layout read so (embeddedIPv4).
	if v4[0] != 0 {
		localUse := []byte{0, 0x64, 0xff, 0x9b, 0, 1}
		put("local-use /96", localUse, 12, v4[:])
		// Below /96 the address is split around the u octet (bits 64-71), which is zero.
		for _, l := range []struct {
			name string
			at   []int
		}{{"local-use /64", []int{9, 10, 11, 12}}, {"local-use /56", []int{7, 9, 10, 11}}, {"local-use /48", []int{6, 7, 9, 10}}} {
			b := rest
			copy(b[:], localUse)
			b[8] = 0
			for i, at := range l.at {
				b[at] = v4[i]
			}
			out[l.name] = netip.AddrFrom16(b)
		}
	}
	return out
}

// FuzzEmbeddedIPv4 (finding 7): whatever the rest of the address, an IPv4 address the rule
// refuses stays refused in every IPv6 form that carries it, and no address makes the rule
// panic. (The local-use prefix's layouts are not asked to refuse 0.0.0.0/8, which they
// cannot tell from zeros of another layout; see embeddedIPv4.)
func FuzzEmbeddedIPv4(f *testing.F) {
	for _, seed := range []string{"169.254.169.254", "127.0.0.1", "100.100.100.200", "0.0.0.0", "224.0.0.1", "8.8.8.8", "10.0.0.1"} {
		a := netip.MustParseAddr(seed).As4()
		f.Add(a[0], a[1], a[2], a[3], make([]byte, 16))
		f.Add(a[0], a[1], a[2], a[3], []byte("\xff\xfe\xfd\xfc\xfb\xfa\xf9\xf8\xf7\xf6\xf5\xf4\xf3\xf2\xf1\xf0"))
	}
	f.Fuzz(func(t *testing.T, a, b, c, d byte, restBytes []byte) {
		var rest [16]byte
		copy(rest[:], restBytes)
		AddressAllowed(netip.AddrFrom16(rest), nil) // never panics
		v4 := [4]byte{a, b, c, d}
		if AddressAllowed(netip.AddrFrom4(v4), nil) {
			return
		}
		for form, addr := range embeddings(v4, rest) {
			if AddressAllowed(addr, nil) {
				t.Errorf("%s (%s) carries the refused %s and is allowed", addr, form, netip.AddrFrom4(v4))
			}
		}
	})
}
