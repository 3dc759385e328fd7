package registrymirror

import (
	"flag"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quartet-operator/quartet/internal/operator"
)

func TestImagesFromEnv(t *testing.T) {
	t.Setenv("RELATED_IMAGE_REGISTRY", "")
	t.Setenv("RELATED_IMAGE_NODE_AGENT", "")
	assert.Equal(t, Images{Registry: "quay.io/quartet-operator/mirror-registry:v0.3.0", NodeAgent: "quay.io/quartet-operator/quartet:v0.3.0"}, ImagesFromEnv())
	t.Setenv("RELATED_IMAGE_REGISTRY", "mirror.local/mirror-registry@sha256:abc")
	t.Setenv("RELATED_IMAGE_NODE_AGENT", " mirror.local/quartet:v9 ")
	assert.Equal(t, Images{Registry: "mirror.local/mirror-registry@sha256:abc", NodeAgent: "mirror.local/quartet:v9"}, ImagesFromEnv())
}

func TestFlagDefaults(t *testing.T) {
	var o Options
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	o.BindFlags(fs)
	assert.NoError(t, fs.Parse(nil))
	assert.Equal(t, Options{MaxConcurrentReconciles: defaultWorkers, HostsRoot: DefaultHostsRoot, Probes: true, AssignedUIDs: "auto"}, o)
	assert.NoError(t, fs.Parse([]string{"--registrymirror-workers=3"}))
	assert.Equal(t, 3, o.MaxConcurrentReconciles)
}

func TestProbeAllowedCIDRs(t *testing.T) {
	parse := func(args ...string) (Options, error) {
		var o Options
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		o.BindFlags(fs)
		require.NoError(t, fs.Parse(args))
		_, err := o.probeAllowedPrefixes()
		return o, err
	}
	o, err := parse()
	require.NoError(t, err)
	prefixes, _ := o.probeAllowedPrefixes()
	assert.Empty(t, prefixes, "nothing is allowed beyond the rule by default")

	o, err = parse("--registrymirror-probe-allowed-cidrs=127.0.0.0/8, ::1/128,,169.254.20.10/32")
	require.NoError(t, err)
	prefixes, _ = o.probeAllowedPrefixes()
	assert.Equal(t, []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128"), netip.MustParsePrefix("169.254.20.10/32")}, prefixes)

	o, err = parse("--registrymirror-probe-allowed-cidrs=127.0.0.1/8")
	require.NoError(t, err)
	prefixes, _ = o.probeAllowedPrefixes()
	assert.Equal(t, []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, prefixes, "host bits are dropped")

	for _, bad := range []string{"127.0.0.1", "10.0.0.0/33", "localhost/8", "127.0.0.0/8;10.0.0.0/8"} {
		o, _ := parse("--registrymirror-probe-allowed-cidrs=" + bad)
		// Setup refuses the value before it touches the manager (nil here).
		err := o.Setup(nil, operator.Shared{})
		assert.ErrorContains(t, err, "--registrymirror-probe-allowed-cidrs: ", bad)
		assert.ErrorContains(t, err, "is not a CIDR", bad)
	}
}

func TestAssignedUIDs(t *testing.T) {
	openShift := func() bool { return true }
	plain := func() bool { return false }
	for _, tc := range []struct {
		flag   string
		hasSCC func() bool
		want   bool
	}{
		{"auto", openShift, true}, {"auto", plain, false}, {"", openShift, true},
		{"true", plain, true}, {"false", openShift, false},
	} {
		o := Options{AssignedUIDs: tc.flag}
		got, err := o.assignedUIDs(tc.hasSCC)
		require.NoError(t, err)
		assert.Equal(t, tc.want, got, "%q", tc.flag)
	}
	_, err := (&Options{AssignedUIDs: "yes"}).assignedUIDs(plain)
	require.ErrorContains(t, err, "--registrymirror-assigned-uids")
}
