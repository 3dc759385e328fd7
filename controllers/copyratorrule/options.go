package copyratorrule

import (
	"flag"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
)

// Options are the manager flags of the copyratorrule controller.
type Options struct {
	// MaxConcurrentReconciles is the number of rules reconciled in parallel.
	MaxConcurrentReconciles int
	// WriteParallelism is the number of copy writes in flight for one rule.
	WriteParallelism int
	// ConflictRecheck is how often a name held by an object Copyrator did not create is
	// tried again.
	ConflictRecheck time.Duration
	// ConsentRecheck is how often a namespace that refused a rule's copies is asked again.
	ConsentRecheck time.Duration
	// ConsentRefresh is how long a namespace's consent is trusted before it is asked again.
	ConsentRefresh time.Duration
	// ProtectedNamespaces are namespaces that, like kube-system, kube-public,
	// kube-node-lease and the operator's own, receive copies only when labelled
	// copyrator.flant.com/accept-copies=true (comma-separated).
	ProtectedNamespaces string
	// MaxCopiesPerRule and MaxCopies bound the copies of one rule and of all rules.
	MaxCopiesPerRule, MaxCopies int64
	// MaxBytesPerRule and MaxBytes bound their content, as quantities (256Mi).
	MaxBytesPerRule, MaxBytes string
}

// Flag names of the limits, also named in the status when a limit is reached.
const (
	flagMaxCopiesPerRule = "copyratorrule-max-copies-per-rule"
	flagMaxBytesPerRule  = "copyratorrule-max-bytes-per-rule"
	flagMaxCopies        = "copyratorrule-max-copies"
	flagMaxBytes         = "copyratorrule-max-bytes"
)

// DefaultOptions returns the flags' defaults. It is the only place they are written:
// BindFlags registers them as the flags' defaults and complete fills an Options' zero fields
// from them, so Options built in code (tests) and on the command line cannot disagree.
//
// The copy counts are the exception: 0 is a value their flags take (no limit), so complete
// leaves a zero count alone and Options built in code without one set no limit on copies.
func DefaultOptions() Options {
	return Options{
		MaxConcurrentReconciles: 2,
		WriteParallelism:        32,
		ConflictRecheck:         2 * time.Minute,
		ConsentRecheck:          time.Minute,
		ConsentRefresh:          10 * time.Minute,
		MaxCopiesPerRule:        20_000,
		MaxBytesPerRule:         "256Mi",
		MaxCopies:               200_000,
		MaxBytes:                "1Gi",
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
	fs.Int64Var(&o.MaxCopies, flagMaxCopies, d.MaxCopies,
		"Most copies all CopyratorRules together may have (0: no limit).")
	fs.StringVar(&o.MaxBytes, flagMaxBytes, d.MaxBytes,
		"Most bytes of content the copies of all CopyratorRules together may hold, a quantity; keep it well below etcd's quota (0: no limit).")
	fs.StringVar(&o.ProtectedNamespaces, "copyratorrule-protected-namespaces", d.ProtectedNamespaces,
		"Comma-separated namespaces that, like kube-system, kube-public, kube-node-lease and the operator's own (always protected), receive copies only when a cluster admin labels them copyrator.flant.com/accept-copies=true.")
}

// complete fills the fields the flags and the caller left at zero or below from
// DefaultOptions (not the copy counts, whose 0 means no limit), and checks the values, with
// an error naming the flag. Setup calls it first.
func (o *Options) complete() error {
	d := DefaultOptions()
	if o.MaxConcurrentReconciles <= 0 {
		o.MaxConcurrentReconciles = d.MaxConcurrentReconciles
	}
	if o.WriteParallelism <= 0 {
		o.WriteParallelism = d.WriteParallelism
	}
	if o.ConflictRecheck <= 0 {
		o.ConflictRecheck = d.ConflictRecheck
	}
	if o.ConsentRecheck <= 0 {
		o.ConsentRecheck = d.ConsentRecheck
	}
	if o.ConsentRefresh <= 0 {
		o.ConsentRefresh = d.ConsentRefresh
	}
	if o.MaxBytesPerRule == "" {
		o.MaxBytesPerRule = d.MaxBytesPerRule
	}
	if o.MaxBytes == "" {
		o.MaxBytes = d.MaxBytes
	}
	_, err := o.limits()
	return err
}

// limits parses the limit flags; a bad quantity is an error naming its flag. Options built
// in code (tests) leave the copy counts at 0: no limit on them.
func (o *Options) limits() (limits, error) {
	l := limits{perRuleCopies: o.MaxCopiesPerRule, copies: o.MaxCopies}
	for _, q := range []struct {
		flag, value string
		into        *int64
	}{{flagMaxBytesPerRule, o.MaxBytesPerRule, &l.perRuleBytes}, {flagMaxBytes, o.MaxBytes, &l.bytes}} {
		v, err := resource.ParseQuantity(q.value)
		if err != nil || v.Sign() < 0 {
			return l, fmt.Errorf("--%s: %q is not a quantity of bytes such as 256Mi", q.flag, q.value)
		}
		*q.into = v.Value()
	}
	if l.perRuleCopies < 0 || l.copies < 0 {
		return l, fmt.Errorf("--%s and --%s must not be negative", flagMaxCopiesPerRule, flagMaxCopies)
	}
	return l, nil
}
