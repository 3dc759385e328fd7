package copyratorrule

import (
	"cmp"
	"flag"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
)

// Options are the manager flags of the copyratorrule controller (BindFlags says what each
// means). MaxBytesPerRule and MaxBytes are quantities (256Mi).
type Options struct {
	MaxConcurrentReconciles, WriteParallelism               int
	ConflictRecheck, ConsentRecheck, ConsentRefresh         time.Duration
	ProtectedNamespaces                                     string
	MaxCopiesPerRule, MaxCopiesPerNamespace, MaxCopies      int64
	MaxBytesPerRule, MaxBytesPerNamespace, MaxBytes         string
	MaxServiceAccountsPerNamespace, ConsentReviewsPerSecond int
	RemovalsPerSecond                                       int
}

// Flag names of the limits, also named in the status when a limit is reached.
const (
	flagMaxCopiesPerRule = "copyratorrule-max-copies-per-rule"
	flagMaxBytesPerRule  = "copyratorrule-max-bytes-per-rule"
	flagMaxCopiesPerNS   = "copyratorrule-max-copies-per-namespace"
	flagMaxBytesPerNS    = "copyratorrule-max-bytes-per-namespace"
	flagMaxSAsPerNS      = "copyratorrule-max-service-accounts-per-namespace"
	flagMaxCopies        = "copyratorrule-max-copies"
	flagMaxBytes         = "copyratorrule-max-bytes"
)

// DefaultOptions returns the flags' defaults, the only place they are written: BindFlags
// and complete take them from here. The copy counts are the exception: 0 is a value their
// flags take (no limit), so Options built in code without one set no limit on copies.
func DefaultOptions() Options {
	return Options{
		MaxConcurrentReconciles: 2,
		WriteParallelism:        32,
		ConflictRecheck:         2 * time.Minute,
		ConsentRecheck:          time.Minute,
		ConsentRefresh:          10 * time.Minute,
		MaxCopiesPerRule:        20_000,
		MaxBytesPerRule:         "256Mi",
		MaxCopiesPerNamespace:   50_000,
		MaxBytesPerNamespace:    "256Mi",
		MaxCopies:               200_000,
		MaxBytes:                "1Gi",

		MaxServiceAccountsPerNamespace: 8,
		ConsentReviewsPerSecond:        20,
		RemovalsPerSecond:              20,
	}
}

// BindFlags registers the controller's flags, with DefaultOptions as their defaults.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	d := DefaultOptions()
	fs.IntVar(&o.MaxConcurrentReconciles, "copyratorrule-workers", d.MaxConcurrentReconciles, "Rules the copyratorrule controller reconciles in parallel.")
	fs.IntVar(&o.WriteParallelism, "copyratorrule-write-parallelism", d.WriteParallelism, "Copy writes in flight for one CopyratorRule (the fan-out of one source into many namespaces).")
	fs.DurationVar(&o.ConflictRecheck, "copyratorrule-conflict-recheck", d.ConflictRecheck, "How often a CopyratorRule retries a namespace where an object it did not create holds the copy's name.")
	fs.DurationVar(&o.ConsentRecheck, "copyratorrule-consent-recheck", d.ConsentRecheck,
		"How often a namespace that refuses a CopyratorRule's copies (its ServiceAccount may not create objects there) is asked again: a new RoleBinding takes effect within this.")
	fs.DurationVar(&o.ConsentRefresh, "copyratorrule-consent-refresh", d.ConsentRefresh,
		"How long a namespace's consent to a CopyratorRule's copies is trusted before it is asked again: a revoked RoleBinding takes effect within this.")
	fs.Int64Var(&o.MaxCopiesPerRule, flagMaxCopiesPerRule, d.MaxCopiesPerRule,
		"Most copies one CopyratorRule may have; beyond it the rule writes no more copies and says so (0: no limit).")
	fs.StringVar(&o.MaxBytesPerRule, flagMaxBytesPerRule, d.MaxBytesPerRule,
		"Most bytes of content the copies of one CopyratorRule may hold, a quantity (0: no limit).")
	fs.Int64Var(&o.MaxCopiesPerNamespace, flagMaxCopiesPerNS, d.MaxCopiesPerNamespace,
		"Most copies the CopyratorRules of one namespace may have together, so that no namespace uses up --copyratorrule-max-copies (0: no limit).")
	fs.StringVar(&o.MaxBytesPerNamespace, flagMaxBytesPerNS, d.MaxBytesPerNamespace,
		"Most bytes of content the copies of one namespace's CopyratorRules may hold together, a quantity (0: no limit).")
	fs.IntVar(&o.MaxServiceAccountsPerNamespace, flagMaxSAsPerNS, d.MaxServiceAccountsPerNamespace,
		"Most distinct ServiceAccounts the CopyratorRules of one namespace may act as; a rule naming one more (the newest rules first) is refused and asks no SubjectAccessReview.")
	fs.IntVar(&o.ConsentReviewsPerSecond, "copyratorrule-consent-reviews-per-second", d.ConsentReviewsPerSecond,
		"SubjectAccessReviews the CopyratorRules of one namespace may ask per second (bursts of twice as many); namespaces not asked yet keep their copies as they are until the next pass.")
	fs.IntVar(&o.RemovalsPerSecond, "copyratorrule-removals-per-second", d.RemovalsPerSecond,
		"Copies the CopyratorRules of one namespace delete or release per second (a rule deleted, a namespace no longer selected or consenting); creates and updates are not paced.")
	fs.Int64Var(&o.MaxCopies, flagMaxCopies, d.MaxCopies,
		"Most copies all CopyratorRules together may have (0: no limit).")
	fs.StringVar(&o.MaxBytes, flagMaxBytes, d.MaxBytes,
		"Most bytes of content the copies of all CopyratorRules together may hold, a quantity; keep it well below etcd's quota (0: no limit).")
	fs.StringVar(&o.ProtectedNamespaces, "copyratorrule-protected-namespaces", d.ProtectedNamespaces,
		"Comma-separated namespaces that, like kube-system, kube-public, kube-node-lease and the operator's own (always protected), receive copies only when a cluster admin labels them copyrator.flant.com/accept-copies=true.")
}

// complete fills the fields left at zero or below from DefaultOptions (not the copy counts)
// and checks the values, with an error naming the flag. Setup calls it first.
func (o *Options) complete() error {
	d := DefaultOptions()
	orDefault(&o.MaxConcurrentReconciles, d.MaxConcurrentReconciles)
	orDefault(&o.WriteParallelism, d.WriteParallelism)
	orDefault(&o.ConflictRecheck, d.ConflictRecheck)
	orDefault(&o.ConsentRecheck, d.ConsentRecheck)
	orDefault(&o.ConsentRefresh, d.ConsentRefresh)
	orDefault(&o.MaxServiceAccountsPerNamespace, d.MaxServiceAccountsPerNamespace)
	orDefault(&o.ConsentReviewsPerSecond, d.ConsentReviewsPerSecond)
	orDefault(&o.RemovalsPerSecond, d.RemovalsPerSecond)
	o.MaxBytesPerRule, o.MaxBytes = cmp.Or(o.MaxBytesPerRule, d.MaxBytesPerRule), cmp.Or(o.MaxBytes, d.MaxBytes)
	o.MaxBytesPerNamespace = cmp.Or(o.MaxBytesPerNamespace, d.MaxBytesPerNamespace)
	_, err := o.limits()
	return err
}

func orDefault[T int | time.Duration](v *T, d T) {
	if *v <= 0 {
		*v = d
	}
}

// limits parses the limit flags; a bad quantity is an error naming its flag.
func (o *Options) limits() (limits, error) {
	l := limits{perRuleCopies: o.MaxCopiesPerRule, perNamespaceCopies: o.MaxCopiesPerNamespace, copies: o.MaxCopies}
	for _, q := range []struct {
		flag, value string
		into        *int64
	}{{flagMaxBytesPerRule, o.MaxBytesPerRule, &l.perRuleBytes}, {flagMaxBytesPerNS, o.MaxBytesPerNamespace, &l.perNamespaceBytes},
		{flagMaxBytes, o.MaxBytes, &l.bytes}} {
		v, err := resource.ParseQuantity(q.value)
		if err != nil || v.Sign() < 0 {
			return l, fmt.Errorf("--%s: %q is not a quantity of bytes such as 256Mi", q.flag, q.value)
		}
		*q.into = v.Value()
	}
	if l.perRuleCopies < 0 || l.perNamespaceCopies < 0 || l.copies < 0 {
		return l, fmt.Errorf("--%s, --%s and --%s must not be negative", flagMaxCopiesPerRule, flagMaxCopiesPerNS, flagMaxCopies)
	}
	return l, nil
}
