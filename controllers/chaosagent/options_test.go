package chaosagent

import (
	"flag"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/quartet-operator/quartet/test/testenv"
)

func TestProtectedNamespaces(t *testing.T) {
	bound := func(args ...string) *Options {
		o := &Options{}
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		o.BindFlags(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return o
	}
	always := func(extra ...string) sets.Set[string] {
		return sets.New("kube-system", "kube-public", "kube-node-lease").Insert(extra...)
	}
	for _, tc := range []struct {
		name      string
		opts      *Options
		operator  string
		protected sets.Set[string]
	}{
		{"flag default", bound(), "quartet-system", always("quartet-system")},
		{"flags not bound", &Options{}, "", always()},
		{"the flag adds to the cluster's namespaces", bound("--chaos-protected-namespaces=a, b,,a"), "own", always("a", "b", "own")},
		{"the flag cannot take kube-system out", bound("--chaos-protected-namespaces=a"), "", always("a")},
		{"empty flag", bound("--chaos-protected-namespaces="), "own", always("own")},
	} {
		assert.Equal(t, tc.protected, tc.opts.protected(tc.operator), tc.name)
	}
}

// TestOptionsDefaultsWrittenOnce: the flags' defaults are DefaultOptions, and complete gives
// an Options built in code without flags (as in the tests) the same values: the two cannot
// disagree. Values that were set are kept; bad ones are refused naming the flag.
func TestOptionsDefaultsWrittenOnce(t *testing.T) {
	fromFlags := testenv.FlagDefaults(t, (*Options).BindFlags, DefaultOptions())

	set := Options{MaxConcurrentReconciles: 5, ProtectedNamespaces: "a,b", GuardAllowedCIDRs: "127.0.0.0/8"}
	testenv.CheckComplete(t, (*Options).complete, []testenv.OptionsCase[Options]{
		testenv.Case("zero Options", Options{}, fromFlags, ""),
		testenv.Case("flag defaults", fromFlags, fromFlags, ""),
		testenv.Case("workers below 1", Options{MaxConcurrentReconciles: -1}, fromFlags, ""),
		testenv.Case("set values kept", set, set, ""),
		testenv.Case("bad CIDR", Options{GuardAllowedCIDRs: "localhost"}, Options{}, `--chaosagent-guard-allowed-cidrs: "localhost" is not a CIDR`),
	})
}

func TestGuardAllowedCIDRs(t *testing.T) {
	parse := func(args ...string) *Options {
		o := &Options{}
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		o.BindFlags(fs)
		require.NoError(t, fs.Parse(args))
		return o
	}
	got, err := parse().guardAllowedPrefixes()
	require.NoError(t, err)
	assert.Empty(t, got, "nothing extra by default")
	got, err = parse("--chaosagent-guard-allowed-cidrs=127.0.0.1/8, ::1/128,,").guardAllowedPrefixes()
	require.NoError(t, err)
	assert.Equal(t, []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}, got)
	_, err = parse("--chaosagent-guard-allowed-cidrs=localhost").guardAllowedPrefixes()
	assert.ErrorContains(t, err, `--chaosagent-guard-allowed-cidrs: "localhost" is not a CIDR`)
}
