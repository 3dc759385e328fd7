package exchangerate

import (
	"errors"
	"time"
)

// jitterFraction spreads requeues over this share of the wait, so thousands of
// ExchangeRates do not write their ConfigMaps in the same second. The first one to wake
// refreshes the shared table; the rest find it fresh.
const jitterFraction = 0.1

// minRequeue keeps a clock skew or an already-due retry from turning into a hot loop.
const minRequeue = time.Second

// nextRefresh returns when to look at an ExchangeRate again; 0 means not until it changes.
//   - unknown currency: a spec mistake, wait for the next edit;
//   - after a failed fetch: when the cache allows the next attempt;
//   - otherwise: when the shared table turns older than the refresh interval.
//
// random returns a number in [0, 1).
func nextRefresh(o outcome, interval time.Duration, random func() float64) time.Duration {
	var unknown *UnknownCurrencyError
	if errors.As(o.QuoteErr, &unknown) {
		return 0
	}
	var wait time.Duration
	if o.Fetch.Err != nil {
		wait = o.Fetch.RetryAt.Sub(o.Now)
	} else {
		wait = o.Fetch.CheckedAt.Add(interval).Sub(o.Now)
	}
	wait = max(wait, 0)
	// Jitter is a share of the whole period (not of what is left of it), so CRs that
	// reconcile at different moments still spread over the same window.
	period := interval
	if o.Fetch.Err != nil {
		period = wait
	}
	wait += time.Duration(random() * jitterFraction * float64(period))
	return max(wait, minRequeue)
}
