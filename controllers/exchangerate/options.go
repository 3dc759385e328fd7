package exchangerate

import (
	"errors"
	"flag"
	"fmt"
	"net/http"
	"slices"
	"strings"
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
	// Source is the sources of ExchangeRates without spec.sources, comma-separated in order
	// of preference: ecb (default), frankfurter, frankfurter-v2 or frankfurter-v2:PROVIDER.
	Source string
	// URL replaces the public base URL of the first of Source's sources (an internal mirror
	// serving the same paths), and of the other sources of the same service (the ECB, or
	// Frankfurter v1 and v2); it wins over ECBURL and FrankfurterURL.
	URL string
	// ECBURL and FrankfurterURL are the base URLs of the ECB's and Frankfurter's (v1 and
	// v2) documents, the public services unless a mirror is named.
	ECBURL, FrankfurterURL string
	// MaxSources bounds the distinct sources (type and provider) the manager fetches from,
	// defaults included: each is one upstream request per refresh, and ExchangeRates choose
	// them.
	MaxSources int
	// RefreshInterval is the refresh period of ExchangeRates without spec.refreshInterval;
	// sources that publish at a known time are refreshed soon after each publication too.
	RefreshInterval time.Duration
	// StaleAfterDays is how old (in days) a publication may be before Stale=True.
	StaleAfterDays int
	// FetchTimeout bounds one upstream request.
	FetchTimeout time.Duration
	// BackoffBase and BackoffMax shape the retry wait after failed fetches.
	BackoffBase, BackoffMax time.Duration
}

// DefaultOptions returns the flags' defaults (docs/exchangerate.md). It is the only place
// they are written: BindFlags registers them as the flags' defaults and complete fills an
// Options' zero fields from them, so Options built in code (tests) and on the command line
// cannot disagree.
func DefaultOptions() Options {
	return Options{
		// See MaxConcurrentReconciles.
		MaxConcurrentReconciles: 16,
		Source:                  SourceECB,
		// URL: none, each service's own below.
		ECBURL:         DefaultECBURL,
		FrankfurterURL: DefaultFrankfurterURL,
		MaxSources:     16,
		// The periodic fallback. The ECB publishes once per working day, and its table is
		// fetched again soon after each publication: between them a refresh finds nothing
		// new. Six hours still notice a publication off the calendar (a correction, a
		// holiday moved) the same day.
		RefreshInterval: 6 * time.Hour,
		StaleAfterDays:  5,
		FetchTimeout:    30 * time.Second,
		BackoffBase:     30 * time.Second,
		BackoffMax:      30 * time.Minute,
	}
}

// BindFlags registers the controller's flags, with DefaultOptions as their defaults.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	d := DefaultOptions()
	fs.IntVar(&o.MaxConcurrentReconciles, "exchangerate-workers", d.MaxConcurrentReconciles, "Parallel workers of the exchangerate controller.")
	fs.StringVar(&o.Source, "exchangerate-source", d.Source, "Sources of ExchangeRates that set no spec.sources, comma-separated in order of preference: "+
		"ecb (ECB euro reference rates, XML), frankfurter (Frankfurter's frozen v1 JSON API) or frankfurter-v2 (Frankfurter's v2 JSON API; "+
		"frankfurter-v2:PROVIDER for one of its providers, such as frankfurter-v2:ECB).")
	fs.StringVar(&o.URL, "exchangerate-url", d.URL, "Base URL of the first --exchangerate-source, for an internal mirror serving the same paths; "+
		"it also serves the other sources of the same service and wins over --exchangerate-ecb-url and --exchangerate-frankfurter-url "+
		"(default "+DefaultECBURL+" for ecb, "+DefaultFrankfurterURL+" for frankfurter and frankfurter-v2).")
	fs.StringVar(&o.ECBURL, "exchangerate-ecb-url", d.ECBURL, "Base URL of the ECB's reference rates (source ecb), or of a mirror serving the same path.")
	fs.StringVar(&o.FrankfurterURL, "exchangerate-frankfurter-url", d.FrankfurterURL,
		"Base URL of Frankfurter (sources frankfurter and frankfurter-v2), or of a self-hosted one.")
	fs.IntVar(&o.MaxSources, "exchangerate-max-sources", d.MaxSources, "Most distinct sources (type and provider) the manager fetches from, "+
		"its defaults included: each costs one upstream request per refresh, and ExchangeRates choose them (spec.sources).")
	fs.DurationVar(&o.RefreshInterval, "exchangerate-refresh-interval", d.RefreshInterval, "Refresh period of ExchangeRates that set no spec.refreshInterval; "+
		"sources that publish at a known time (the ECB's rates) are also refreshed soon after each publication.")
	fs.IntVar(&o.StaleAfterDays, "exchangerate-stale-after-days", d.StaleAfterDays, "Days a publication may be old before ExchangeRates turn Stale "+
		"(the ECB publishes on TARGET working days; 5 covers the Easter weekend).")
	fs.DurationVar(&o.FetchTimeout, "exchangerate-fetch-timeout", d.FetchTimeout, "Time limit of one upstream request.")
	fs.DurationVar(&o.BackoffBase, "exchangerate-backoff-base", d.BackoffBase, "Wait before the first retry after a failed fetch; doubles per failure.")
	fs.DurationVar(&o.BackoffMax, "exchangerate-backoff-max", d.BackoffMax, "Longest wait between retries after failed fetches.")
}

// complete fills what neither flags nor the caller set from DefaultOptions: a zero value
// means the default (docs/exchangerate.md), so a zero Options works too. Then it refuses
// the values defaults cannot mend, with a message naming the flag. Setup calls it first.
func (o *Options) complete() error {
	d := DefaultOptions()
	if o.MaxConcurrentReconciles <= 0 {
		o.MaxConcurrentReconciles = d.MaxConcurrentReconciles
	}
	if o.Source == "" {
		o.Source = d.Source
	}
	if o.ECBURL == "" {
		o.ECBURL = d.ECBURL
	}
	if o.FrankfurterURL == "" {
		o.FrankfurterURL = d.FrankfurterURL
	}
	if o.MaxSources == 0 {
		o.MaxSources = d.MaxSources
	}
	if o.RefreshInterval == 0 {
		o.RefreshInterval = d.RefreshInterval
	}
	if o.StaleAfterDays == 0 {
		o.StaleAfterDays = d.StaleAfterDays
	}
	if o.FetchTimeout == 0 {
		o.FetchTimeout = d.FetchTimeout
	}
	if o.BackoffBase == 0 {
		o.BackoffBase = d.BackoffBase
	}
	if o.BackoffMax == 0 {
		o.BackoffMax = d.BackoffMax
	}

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
	if o.MaxSources < 0 {
		errs = append(errs, fmt.Errorf("--exchangerate-max-sources must be positive, got %d", o.MaxSources))
	}
	if _, err := o.defaultSources(); err != nil {
		errs = append(errs, err)
	}
	// Every service's URL, whether the defaults use it or not: an ExchangeRate may name any
	// source type.
	for _, typ := range []string{SourceECB, SourceFrankfurter} {
		if _, err := NewSource(typ, o.urlFor(typ), http.DefaultClient); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// defaultSources parses --exchangerate-source.
func (o *Options) defaultSources() ([]SourceRef, error) {
	var refs []SourceRef
	for _, name := range strings.Split(o.Source, ",") {
		ref, err := ParseSourceRef(name)
		if err != nil {
			return nil, fmt.Errorf("--exchangerate-source: %w", err)
		}
		if slices.Contains(refs, ref) {
			return nil, fmt.Errorf("--exchangerate-source names %s twice", ref)
		}
		refs = append(refs, ref)
	}
	return refs, nil
}

// service is the service a source type's documents come from: Frankfurter serves v1 and v2.
func service(typ string) string {
	if typ == SourceFrankfurterV2 {
		return SourceFrankfurter
	}
	return typ
}

// urlFor is the base URL of a source type: --exchangerate-url for the service of the first
// default source, else the service's own flag.
func (o *Options) urlFor(typ string) string {
	first, _, _ := strings.Cut(o.Source, ",")
	firstType, _, _ := strings.Cut(strings.TrimSpace(first), ":")
	if o.URL != "" && service(firstType) == service(typ) {
		return o.URL
	}
	if service(typ) == SourceFrankfurter {
		return o.FrankfurterURL
	}
	return o.ECBURL
}
