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
}

// BindFlags registers the controller's flags.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	fs.IntVar(&o.MaxConcurrentReconciles, "copyratorrule-workers", 2, "Rules the copyratorrule controller reconciles in parallel.")
	fs.IntVar(&o.WriteParallelism, "copyratorrule-write-parallelism", 32, "Copy writes in flight for one CopyratorRule (the fan-out of one source into many namespaces).")
	fs.DurationVar(&o.ConflictRecheck, "copyratorrule-conflict-recheck", 2*time.Minute, "How often a CopyratorRule retries a namespace where an object it did not create holds the copy's name.")
}

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
}
