package copyratorrule

import (
	"testing"
	"time"

	"github.com/quartet-operator/quartet/test/testenv"
)

// TestOptionsDefaultsWrittenOnce: the flags' defaults are DefaultOptions, and complete gives
// an Options built in code without flags (as in the tests) the same values: the two cannot
// disagree. The copy counts are the one exception: their 0 is a flag value (no limit), kept.
// Values that were set are kept; bad ones are refused naming the flag.
func TestOptionsDefaultsWrittenOnce(t *testing.T) {
	fromFlags := testenv.FlagDefaults(t, (*Options).BindFlags, DefaultOptions())

	noCopyLimits := fromFlags
	noCopyLimits.MaxCopiesPerRule, noCopyLimits.MaxCopiesPerNamespace, noCopyLimits.MaxCopies = 0, 0, 0
	set := Options{MaxConcurrentReconciles: 3, WriteParallelism: 4, ConflictRecheck: time.Second, ConsentRecheck: 2 * time.Second,
		ConsentRefresh: 3 * time.Second, ProtectedNamespaces: "a", MaxCopiesPerRule: 5, MaxCopies: 6, MaxBytesPerRule: "0", MaxBytes: "1Mi",
		MaxCopiesPerNamespace: 7, MaxBytesPerNamespace: "2Mi", MaxServiceAccountsPerNamespace: 2, ConsentReviewsPerSecond: 3, RemovalsPerSecond: 4}
	testenv.CheckComplete(t, (*Options).complete, []testenv.OptionsCase[Options]{
		testenv.Case("zero Options: the defaults, no limit on copies", Options{}, noCopyLimits, ""),
		testenv.Case("flag defaults", fromFlags, fromFlags, ""),
		testenv.Case("negative counts and durations", Options{MaxConcurrentReconciles: -1, WriteParallelism: -1, ConflictRecheck: -time.Second,
			ConsentRecheck: -time.Second, ConsentRefresh: -time.Second, MaxServiceAccountsPerNamespace: -1, ConsentReviewsPerSecond: -1, RemovalsPerSecond: -1}, noCopyLimits, ""),
		testenv.Case("set values kept", set, set, ""),
		testenv.Case("bad quantity per namespace", Options{MaxBytesPerNamespace: "-1"}, Options{}, `--copyratorrule-max-bytes-per-namespace: "-1" is not a quantity`),
		testenv.Case("bad quantity", Options{MaxBytes: "lots"}, Options{}, `--copyratorrule-max-bytes: "lots" is not a quantity`),
		testenv.Case("negative copy limit", Options{MaxCopies: -1}, Options{}, "--copyratorrule-max-copies-per-rule, --copyratorrule-max-copies-per-namespace and --copyratorrule-max-copies must not be negative"),
	})
}
