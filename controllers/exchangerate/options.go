package exchangerate

import (
	"errors"
	"flag"
	"fmt"
	"time"
)

// Options are the manager flags of the exchangerate controller.
type Options struct {
	// MaxConcurrentReconciles is the number of parallel workers. Default 16: a pass writes
	// the ConfigMap and then the status, two round trips, so a few workers leave the API
	// server idle while thousands of ExchangeRates wait (measured: 2 workers fill 1,000 in
	// about twice the time 16 take); beyond 16 the workers only queue at the API server and
	// slow the clients that create the ExchangeRates (32 was no faster). See
	// docs/exchangerate.md, Performance.
	MaxConcurrentReconciles int
	// Source is the upstream: ecb (default) or frankfurter.
	Source string
	// URL replaces the source's public base URL (an internal mirror serving the same paths).
	URL string
	// RefreshInterval is the refresh period of ExchangeRates without spec.refreshInterval.
	RefreshInterval time.Duration
	// StaleAfterDays is how old (in days) a publication may be before Stale=True.
	StaleAfterDays int
	// FetchTimeout bounds one upstream request.
	FetchTimeout time.Duration
	// BackoffBase and BackoffMax shape the retry wait after failed fetches.
	BackoffBase, BackoffMax time.Duration
}

// defaultWorkers is the default of --exchangerate-workers (see MaxConcurrentReconciles).
const defaultWorkers = 16

// BindFlags registers the controller's flags.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	fs.IntVar(&o.MaxConcurrentReconciles, "exchangerate-workers", defaultWorkers, "Parallel workers of the exchangerate controller.")
	fs.StringVar(&o.Source, "exchangerate-source", SourceECB, "Exchange rate source: ecb (ECB euro reference rates, XML) or frankfurter (Frankfurter JSON API).")
	fs.StringVar(&o.URL, "exchangerate-url", "", "Base URL of the exchange rate source, for an internal mirror serving the same paths "+
		"(default "+DefaultECBURL+" for ecb, "+DefaultFrankfurterURL+" for frankfurter).")
	fs.DurationVar(&o.RefreshInterval, "exchangerate-refresh-interval", time.Hour, "Refresh period of ExchangeRates that set no spec.refreshInterval.")
	fs.IntVar(&o.StaleAfterDays, "exchangerate-stale-after-days", 5, "Days a publication may be old before ExchangeRates turn Stale "+
		"(the ECB publishes on TARGET working days; 5 covers the Easter weekend).")
	fs.DurationVar(&o.FetchTimeout, "exchangerate-fetch-timeout", 30*time.Second, "Time limit of one upstream request.")
	fs.DurationVar(&o.BackoffBase, "exchangerate-backoff-base", 30*time.Second, "Wait before the first retry after a failed fetch; doubles per failure.")
	fs.DurationVar(&o.BackoffMax, "exchangerate-backoff-max", 30*time.Minute, "Longest wait between retries after failed fetches.")
}

// defaults fills what neither flags nor the caller set: a zero value means the default
// (docs/exchangerate.md), so a zero Options works too.
func (o *Options) defaults() {
	if o.MaxConcurrentReconciles <= 0 {
		o.MaxConcurrentReconciles = defaultWorkers
	}
	if o.Source == "" {
		o.Source = SourceECB
	}
	if o.RefreshInterval == 0 {
		o.RefreshInterval = time.Hour
	}
	if o.StaleAfterDays == 0 {
		o.StaleAfterDays = 5
	}
	if o.FetchTimeout == 0 {
		o.FetchTimeout = 30 * time.Second
	}
	if o.BackoffBase == 0 {
		o.BackoffBase = 30 * time.Second
	}
	if o.BackoffMax == 0 {
		o.BackoffMax = 30 * time.Minute
	}
}

// validate refuses flag values defaults cannot mend, with a message naming the flag.
func (o *Options) validate() error {
	var errs []error
	if o.RefreshInterval < 0 {
		errs = append(errs, fmt.Errorf("--exchangerate-refresh-interval must be positive, got %s", o.RefreshInterval))
	}
	if o.StaleAfterDays < 0 {
		errs = append(errs, fmt.Errorf("--exchangerate-stale-after-days must be positive, got %d", o.StaleAfterDays))
	}
	if o.FetchTimeout < 0 {
		errs = append(errs, fmt.Errorf("--exchangerate-fetch-timeout must be positive, got %s", o.FetchTimeout))
	}
	if o.BackoffBase < 0 || o.BackoffMax < o.BackoffBase {
		errs = append(errs, fmt.Errorf("--exchangerate-backoff-base (%s) must be positive and at most --exchangerate-backoff-max (%s)", o.BackoffBase, o.BackoffMax))
	}
	return errors.Join(errs...)
}
