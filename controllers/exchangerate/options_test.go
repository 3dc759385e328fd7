package exchangerate

import (
	"flag"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	operatorsv1 "github.com/quartet-operator/quartet/api/operators/v1"
	"github.com/quartet-operator/quartet/internal/manager"
	"github.com/quartet-operator/quartet/internal/scope"
	"github.com/quartet-operator/quartet/test/testenv"
)

// boundFlags returns a flag set holding only this controller's flags, bound to o.
func boundFlags(o *Options) *flag.FlagSet {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	o.BindFlags(fs)
	return fs
}

// sameFlagValue reports whether value, given on the command line, means the flag's
// default (so "1h" matches a duration flag whose default prints as "1h0m0s").
func sameFlagValue(t *testing.T, name, value string) bool {
	t.Helper()
	fs := boundFlags(&Options{})
	require.NoError(t, fs.Set(name, value), "--%s=%s", name, value)
	return fs.Lookup(name).Value.String() == fs.Lookup(name).DefValue
}

// TestFlagDefaultsAsDocumented: every flag is in the table of docs/exchangerate.md with
// its real default, and every "--flag (default)" mention in the docs, the API type and
// the CSV names the real default too.
func TestFlagDefaultsAsDocumented(t *testing.T) {
	fs := boundFlags(&Options{})
	doc, err := os.ReadFile("../../docs/exchangerate.md")
	require.NoError(t, err)
	_, table, ok := strings.Cut(string(doc), "\n## Manager flags\n")
	require.True(t, ok, "docs/exchangerate.md has a Manager flags section")
	table, _, _ = strings.Cut(table, "\n## ")

	documented := map[string]bool{}
	row := regexp.MustCompile("(?m)^\\| `--([a-z-]+)` \\| ([^|]*) \\|")
	for _, m := range row.FindAllStringSubmatch(table, -1) {
		name, def := m[1], strings.TrimSpace(m[2])
		documented[name] = true
		f := fs.Lookup(name)
		if !assert.NotNil(t, f, "documented flag --%s exists", name) {
			continue
		}
		if value, ok := strings.CutPrefix(def, "`"); ok {
			assert.True(t, sameFlagValue(t, name, strings.TrimSuffix(value, "`")), "--%s: documented default %s, flag default %s", name, def, f.DefValue)
		} else {
			// --exchangerate-url's default depends on the source: empty, and the help text names both.
			assert.Equal(t, "exchangerate-url", name, "only --exchangerate-url has a default that is not a value")
			assert.Empty(t, f.DefValue)
			assert.Contains(t, f.Usage, DefaultECBURL)
			assert.Contains(t, f.Usage, DefaultFrankfurterURL)
		}
	}
	fs.VisitAll(func(f *flag.Flag) { assert.True(t, documented[f.Name], "--%s is in the docs' flag table", f.Name) })

	mention := regexp.MustCompile("`?--(exchangerate-[a-z-]+)`? \\(([0-9][0-9a-z]*)\\)")
	for _, file := range []string{
		"../../docs/exchangerate.md",
		"../../api/operators/v1/exchangerate_types.go",
		"../../config/manifests/bases/quartet.clusterserviceversion.yaml",
	} {
		b, err := os.ReadFile(file)
		require.NoError(t, err)
		mentions := mention.FindAllStringSubmatch(string(b), -1)
		assert.NotEmpty(t, mentions, "%s names a flag's default", file)
		for _, m := range mentions {
			assert.True(t, sameFlagValue(t, m[1], m[2]), "%s says %s; the flag's default is %s", file, m[0], fs.Lookup(m[1]).DefValue)
		}
	}
}

// TestOptionsDefaultsWrittenOnce: the flags' defaults are DefaultOptions, and "a zero
// duration or count means the default" (docs), so complete gives an Options built in code
// without flags the same values as the command line without flags: the two cannot
// disagree. Values that were set are kept.
func TestOptionsDefaultsWrittenOnce(t *testing.T) {
	fromFlags := testenv.FlagDefaults(t, (*Options).BindFlags, DefaultOptions())

	set := Options{MaxConcurrentReconciles: 8, Source: SourceFrankfurter, URL: "http://mirror.internal", ECBURL: "http://ecb.internal",
		FrankfurterURL: "http://frankfurter.internal", MaxSources: 3, RefreshInterval: time.Minute,
		StaleAfterDays: 3, FetchTimeout: time.Second, BackoffBase: 2 * time.Second, BackoffMax: time.Minute}
	testenv.CheckComplete(t, (*Options).complete, []testenv.OptionsCase[Options]{
		testenv.Case("zero Options", Options{}, fromFlags, ""),
		testenv.Case("flag defaults", fromFlags, fromFlags, ""),
		testenv.Case("workers below 1", Options{MaxConcurrentReconciles: -1}, fromFlags, ""),
		testenv.Case("set values kept", set, set, ""),
	})
}

// TestFlagsFromCommandLineAndEnvironment: each flag sets its field, and main.go's
// environment path (QUARTET_EXCHANGERATE_*, for OLM installs) sets what the command
// line left unset.
func TestFlagsFromCommandLineAndEnvironment(t *testing.T) {
	var o Options
	fs := boundFlags(&o)
	require.NoError(t, fs.Parse([]string{
		"--exchangerate-source=frankfurter", "--exchangerate-refresh-interval=15m", "--exchangerate-fetch-timeout=5s",
		"--exchangerate-backoff-base=1s", "--exchangerate-workers=8",
	}))
	env := map[string]string{
		"QUARTET_EXCHANGERATE_SOURCE":           "ecb", // the command line wins
		"QUARTET_EXCHANGERATE_URL":              "http://mirror.internal",
		"QUARTET_EXCHANGERATE_STALE_AFTER_DAYS": "4",
		"QUARTET_EXCHANGERATE_BACKOFF_MAX":      "1m",
		"QUARTET_EXCHANGERATE_FRANKFURTER_URL":  "http://frankfurter.internal",
	}
	require.NoError(t, manager.SetFlagsFromEnv(fs, func(k string) (string, bool) { v, ok := env[k]; return v, ok }))
	assert.Equal(t, Options{MaxConcurrentReconciles: 8, Source: SourceFrankfurter, URL: "http://mirror.internal", ECBURL: DefaultECBURL,
		FrankfurterURL: "http://frankfurter.internal", MaxSources: 16, RefreshInterval: 15 * time.Minute,
		StaleAfterDays: 4, FetchTimeout: 5 * time.Second, BackoffBase: time.Second, BackoffMax: time.Minute}, o)

	t.Log("a value the flag cannot parse names the variable and the flag")
	err := manager.SetFlagsFromEnv(boundFlags(&Options{}), func(k string) (string, bool) {
		return "soon", k == "QUARTET_EXCHANGERATE_REFRESH_INTERVAL"
	})
	assert.ErrorContains(t, err, "QUARTET_EXCHANGERATE_REFRESH_INTERVAL (flag --exchangerate-refresh-interval)")
}

// TestSetupRefusesBadFlagValues: Setup refuses values before it touches the manager (nil
// here), with a message naming the flag (the source and URL errors, from NewSource, name
// the source and the URL's host instead).
func TestSetupRefusesBadFlagValues(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantErrs []string
	}{
		{"negative refresh interval", []string{"--exchangerate-refresh-interval=-1s"}, []string{"--exchangerate-refresh-interval must be positive, got -1s"}},
		{"negative stale days", []string{"--exchangerate-stale-after-days=-1"}, []string{"--exchangerate-stale-after-days must be positive, got -1"}},
		{"negative fetch timeout", []string{"--exchangerate-fetch-timeout=-5s"}, []string{"--exchangerate-fetch-timeout must be positive"}},
		{"backoff base above max", []string{"--exchangerate-backoff-base=1h", "--exchangerate-backoff-max=1m"},
			[]string{"--exchangerate-backoff-base (1h0m0s) must be positive and at most --exchangerate-backoff-max (1m0s)"}},
		{"backoff base above the default max", []string{"--exchangerate-backoff-base=1h"}, []string{"at most --exchangerate-backoff-max (30m0s)"}},
		{"every bad flag at once", []string{"--exchangerate-refresh-interval=-1s", "--exchangerate-fetch-timeout=-1s"},
			[]string{"--exchangerate-refresh-interval", "--exchangerate-fetch-timeout"}},
		{"unknown source", []string{"--exchangerate-source=oanda"},
			[]string{`--exchangerate-source: unknown exchange rate source "oanda" (want ecb, frankfurter or frankfurter-v2)`}},
		{"provider of a source without providers", []string{"--exchangerate-source=ecb:ECB"},
			[]string{`--exchangerate-source: exchange rate source "ecb:ECB": only frankfurter-v2 takes a provider`}},
		{"provider not a key", []string{"--exchangerate-source=frankfurter-v2:ecb"}, []string{`provider "ecb" is not an upper-case provider key`}},
		{"a source twice", []string{"--exchangerate-source=ecb,frankfurter-v2, ecb"}, []string{"--exchangerate-source names ecb twice"}},
		{"more defaults than the limit", []string{"--exchangerate-source=ecb,frankfurter-v2", "--exchangerate-max-sources=1"},
			[]string{"--exchangerate-source names 2 sources, more than --exchangerate-max-sources (1)"}},
		{"negative source limit", []string{"--exchangerate-max-sources=-1"}, []string{"--exchangerate-max-sources must be positive, got -1"}},
		{"URL with credentials", []string{"--exchangerate-url=https://rates:s3cret@mirror.internal"},
			[]string{"exchange rate URL for mirror.internal carries credentials"}},
		{"Frankfurter URL with credentials, although the defaults do not use it", []string{"--exchangerate-frankfurter-url=https://rates:s3cret@ff.internal"},
			[]string{"exchange rate URL for ff.internal carries credentials"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var o Options
			require.NoError(t, boundFlags(&o).Parse(tt.args))
			err := o.Setup(nil, scope.Namespaces{})
			require.Error(t, err)
			for _, want := range tt.wantErrs {
				assert.ErrorContains(t, err, want)
			}
			assert.NotContains(t, err.Error(), "s3cret")
		})
	}
}

// TestReconcilerFromOptions: what the flag values become in the reconciler Setup registers.
func TestReconcilerFromOptions(t *testing.T) {
	shared := scope.Namespaces{Watched: []string{"shop"}}
	steps := func(c *RateCache, n int) []time.Duration {
		b := c.backoff
		var out []time.Duration
		for range n {
			out = append(out, b.Step())
		}
		return out
	}
	build := func(t *testing.T, args ...string) (*Reconciler, []*RateCache) {
		t.Helper()
		var o Options
		require.NoError(t, boundFlags(&o).Parse(args))
		require.NoError(t, o.complete())
		sources, err := o.newSources(clock.RealClock{}, http.DefaultClient)
		require.NoError(t, err)
		r := o.newReconciler(sources, shared)
		return r, r.Sources.Defaults()
	}

	t.Run("defaults", func(t *testing.T) {
		r, caches := build(t)
		assert.Equal(t, 6*time.Hour, r.DefaultInterval)
		assert.Equal(t, 5, r.StaleAfterDays)
		require.Len(t, caches, 1)
		c := caches[0]
		assert.Equal(t, "ecb", c.Name())
		assert.Equal(t, DefaultECBURL+ECBPath, sourceURL(c.source))
		assert.Equal(t, 16, c.Schedule().Hour, "the ECB publishes at 16:00 CET")
		assert.Equal(t, 30*time.Second, c.timeout)
		assert.Equal(t, []time.Duration{30 * time.Second, time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute,
			16 * time.Minute, 30 * time.Minute, 30 * time.Minute}, steps(c, 8))
		assert.Equal(t, shared, r.Namespaces)
		assert.IsType(t, clock.RealClock{}, r.Clock)
		assert.IsType(t, clock.RealClock{}, c.clock)
		assert.Equal(t, 16, r.Sources.max)
	})
	t.Run("flags", func(t *testing.T) {
		r, caches := build(t, "--exchangerate-refresh-interval=15m", "--exchangerate-stale-after-days=3",
			"--exchangerate-fetch-timeout=5s", "--exchangerate-backoff-base=1s", "--exchangerate-backoff-max=5s",
			"--exchangerate-source=frankfurter-v2:ECB,ecb", "--exchangerate-max-sources=3")
		assert.Equal(t, 15*time.Minute, r.DefaultInterval)
		assert.Equal(t, 3, r.StaleAfterDays)
		require.Len(t, caches, 2)
		assert.Equal(t, []string{"frankfurter-v2:ECB", "ecb"}, []string{caches[0].Name(), caches[1].Name()})
		assert.Equal(t, DefaultFrankfurterURL+"/v2/rates?base=EUR&providers=ECB", sourceURL(caches[0].source))
		assert.Equal(t, 5*time.Second, caches[0].timeout)
		assert.Equal(t, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second}, steps(caches[1], 5))
		assert.Equal(t, 3, r.Sources.max)
	})
	t.Run("URLs", func(t *testing.T) {
		for _, tt := range []struct {
			name          string
			args          []string
			ecb, frankfur string
		}{
			{"public by default", nil, DefaultECBURL, DefaultFrankfurterURL},
			{"--exchangerate-url serves the first default's service", []string{"--exchangerate-url=http://mirror"}, "http://mirror", DefaultFrankfurterURL},
			{"--exchangerate-url of a Frankfurter default serves v1 and v2",
				[]string{"--exchangerate-source=frankfurter", "--exchangerate-url=http://mirror", "--exchangerate-ecb-url=http://ecb"}, "http://ecb", "http://mirror"},
			{"--exchangerate-url wins", []string{"--exchangerate-url=http://mirror", "--exchangerate-ecb-url=http://ecb"}, "http://mirror", DefaultFrankfurterURL},
			{"one flag per service", []string{"--exchangerate-ecb-url=http://ecb", "--exchangerate-frankfurter-url=http://ff"}, "http://ecb", "http://ff"},
		} {
			t.Run(tt.name, func(t *testing.T) {
				r, _ := build(t, tt.args...)
				caches, err := r.Sources.For(types.NamespacedName{Name: "xr"}, []operatorsv1.ExchangeRateSource{{Type: "ecb"}, {Type: "frankfurter"}, {Type: "frankfurter-v2"}})
				require.NoError(t, err)
				assert.Equal(t, tt.ecb+ECBPath, sourceURL(caches[0].source))
				assert.Equal(t, tt.frankfur+FrankfurterPath+"?base=EUR", sourceURL(caches[1].source))
				assert.Equal(t, tt.frankfur+FrankfurterV2Path+"?base=EUR", sourceURL(caches[2].source))
			})
		}
	})
}
