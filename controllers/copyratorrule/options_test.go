package copyratorrule

import (
	"flag"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOptionsDefaultsWrittenOnce: the flags' defaults are DefaultOptions, and complete gives
// an Options built in code without flags (as in the tests) the same values: the two cannot
// disagree. The copy counts are the one exception: their 0 is a flag value (no limit), kept.
// Values that were set are kept; bad ones are refused naming the flag.
func TestOptionsDefaultsWrittenOnce(t *testing.T) {
	var fromFlags Options
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fromFlags.BindFlags(fs)
	require.NoError(t, fs.Parse(nil))
	require.Equal(t, DefaultOptions(), fromFlags, "the flags' defaults")

	noCopyLimits := fromFlags
	noCopyLimits.MaxCopiesPerRule, noCopyLimits.MaxCopies = 0, 0
	set := Options{MaxConcurrentReconciles: 3, WriteParallelism: 4, ConflictRecheck: time.Second, ConsentRecheck: 2 * time.Second,
		ConsentRefresh: 3 * time.Second, ProtectedNamespaces: "a", MaxCopiesPerRule: 5, MaxCopies: 6, MaxBytesPerRule: "0", MaxBytes: "1Mi"}
	for _, tc := range []struct {
		name    string
		in      Options
		want    Options
		wantErr string
	}{
		{"zero Options: the defaults, no limit on copies", Options{}, noCopyLimits, ""},
		{"flag defaults", fromFlags, fromFlags, ""},
		{"negative counts and durations", Options{MaxConcurrentReconciles: -1, WriteParallelism: -1, ConflictRecheck: -time.Second,
			ConsentRecheck: -time.Second, ConsentRefresh: -time.Second}, noCopyLimits, ""},
		{"set values kept", set, set, ""},
		{"bad quantity", Options{MaxBytes: "lots"}, Options{}, `--copyratorrule-max-bytes: "lots" is not a quantity`},
		{"negative copy limit", Options{MaxCopies: -1}, Options{}, "--copyratorrule-max-copies-per-rule and --copyratorrule-max-copies must not be negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.in
			err := got.complete()
			if tc.wantErr != "" {
				assert.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}
