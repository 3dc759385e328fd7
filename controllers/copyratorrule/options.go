package copyratorrule

import (
	"flag"
	"time"
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
}

// BindFlags registers the controller's flags.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	fs.IntVar(&o.MaxConcurrentReconciles, "copyratorrule-workers", 2, "Rules the copyratorrule controller reconciles in parallel.")
	fs.IntVar(&o.WriteParallelism, "copyratorrule-write-parallelism", 32, "Copy writes in flight for one CopyratorRule (the fan-out of one source into many namespaces).")
	fs.DurationVar(&o.ConflictRecheck, "copyratorrule-conflict-recheck", 2*time.Minute, "How often a CopyratorRule retries a namespace where an object it did not create holds the copy's name.")
	fs.DurationVar(&o.ConsentRecheck, "copyratorrule-consent-recheck", defaultConsentRecheck,
		"How often a namespace that refuses a CopyratorRule's copies (its ServiceAccount may not create objects there) is asked again: a new RoleBinding takes effect within this.")
	fs.DurationVar(&o.ConsentRefresh, "copyratorrule-consent-refresh", defaultConsentRefresh,
		"How long a namespace's consent to a CopyratorRule's copies is trusted before it is asked again: a revoked RoleBinding takes effect within this.")
	fs.StringVar(&o.ProtectedNamespaces, "copyratorrule-protected-namespaces", "",
		"Comma-separated namespaces that, like kube-system, kube-public, kube-node-lease and the operator's own (always protected), receive copies only when a cluster admin labels them copyrator.flant.com/accept-copies=true.")
}

// Defaults of the consent flags.
const (
	defaultConsentRecheck = time.Minute
	defaultConsentRefresh = 10 * time.Minute
)

// defaults replaces zero or negative values (Options built in code, as in the tests) with
// the flags' defaults.
func (o *Options) defaults() {
	if o.MaxConcurrentReconciles <= 0 {
		o.MaxConcurrentReconciles = 2
	}
	if o.WriteParallelism <= 0 {
		o.WriteParallelism = 32
	}
	if o.ConflictRecheck <= 0 {
		o.ConflictRecheck = 2 * time.Minute
	}
	if o.ConsentRecheck <= 0 {
		o.ConsentRecheck = defaultConsentRecheck
	}
	if o.ConsentRefresh <= 0 {
		o.ConsentRefresh = defaultConsentRefresh
	}
}
