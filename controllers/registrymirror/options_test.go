package registrymirror

import (
	"flag"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quartet-operator/quartet/internal/scope"
	"github.com/quartet-operator/quartet/test/testenv"
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
	assert.Equal(t, Options{MaxConcurrentReconciles: 8, HostsRoot: DefaultHostsRoot, Probes: true, AssignedUIDs: "auto", MaxPinnedImages: 5000}, o)
	assert.NoError(t, fs.Parse([]string{"--registrymirror-workers=3", "--registrymirror-max-pinned-images=500"}))
	assert.Equal(t, 3, o.MaxConcurrentReconciles)
	assert.Equal(t, 500, o.MaxPinnedImages)
}

// TestOptionsDefaultsWrittenOnce: the flags' defaults are DefaultOptions, and complete gives
// an Options built in code without flags (as in the tests) the same values: the two cannot
// disagree. Probes is the one exception: its false is a flag value (probes off), kept.
// Values that were set are kept; bad ones are refused naming the flag.
func TestOptionsDefaultsWrittenOnce(t *testing.T) {
	fromFlags := testenv.FlagDefaults(t, (*Options).BindFlags, DefaultOptions())

	noProbes := fromFlags
	noProbes.Probes = false
	set := Options{MaxConcurrentReconciles: 3, HostsRoot: "/etc/k3s/certs.d", Probes: true, ProbeAllowedCIDRs: "127.0.0.0/8", AssignedUIDs: "false", MaxPinnedImages: 20}
	testenv.CheckComplete(t, (*Options).complete, []testenv.OptionsCase[Options]{
		testenv.Case("zero Options: the defaults, probes off", Options{}, noProbes, ""),
		testenv.Case("flag defaults", fromFlags, fromFlags, ""),
		testenv.Case("workers below 1", Options{MaxConcurrentReconciles: -1}, noProbes, ""),
		testenv.Case("set values kept", set, set, ""),
		testenv.Case("bad CIDR", Options{ProbeAllowedCIDRs: "localhost"}, Options{}, `--registrymirror-probe-allowed-cidrs: "localhost" is not a CIDR`),
		testenv.Case("bad assigned UIDs", Options{AssignedUIDs: "yes"}, Options{}, `--registrymirror-assigned-uids: "yes" is not auto, true or false`),
		testenv.Case("negative pinned images", Options{MaxPinnedImages: -1}, Options{}, `--registrymirror-max-pinned-images must be between 1 and 5000 (the pinned list fits a ConfigMap), got -1`),
		testenv.Case("too many pinned images", Options{MaxPinnedImages: 5001}, Options{}, `--registrymirror-max-pinned-images must be between 1 and 5000 (the pinned list fits a ConfigMap), got 5001`),
	})
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
		err := o.Setup(nil, scope.Namespaces{})
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
