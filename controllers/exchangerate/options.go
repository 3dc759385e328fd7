package exchangerate

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
)

// Options are the exchangerate controller's flags (BindFlags, docs/exchangerate.md).
type Options struct {
	MaxConcurrentReconciles     int
	Source                      string
	URL, ECBURL, FrankfurterURL string // URL wins over the others for the first default source's service
	MaxSources                  int
	RefreshInterval             time.Duration
	StaleAfterDays              int
	FetchTimeout                time.Duration
	BackoffBase, BackoffMax     time.Duration
}

// DefaultOptions returns the flags' defaults, the only place they are written.
func DefaultOptions() Options {
	return Options{
		// A pass writes the ConfigMap and then the status, two round trips: 2 workers fill
		// 1,000 ExchangeRates in about twice the time 16 take, 32 were no faster.
		MaxConcurrentReconciles: 16,
		Source:                  SourceECB,
		ECBURL:                  DefaultECBURL,
		FrankfurterURL:          DefaultFrankfurterURL,
		MaxSources:              16,
		// The periodic fallback: the ECB's table is fetched soon after each publication
		// anyway; six hours still notice one off the calendar the same day.
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

// complete fills zero fields from DefaultOptions and refuses bad values, naming the flag.
func (o *Options) complete() error {
	d := DefaultOptions()
	if o.MaxConcurrentReconciles <= 0 {
		o.MaxConcurrentReconciles = d.MaxConcurrentReconciles
	}
	o.Source = cmp.Or(o.Source, d.Source)
	o.ECBURL = cmp.Or(o.ECBURL, d.ECBURL)
	o.FrankfurterURL = cmp.Or(o.FrankfurterURL, d.FrankfurterURL)
	o.MaxSources = cmp.Or(o.MaxSources, d.MaxSources)
	o.RefreshInterval = cmp.Or(o.RefreshInterval, d.RefreshInterval)
	o.StaleAfterDays = cmp.Or(o.StaleAfterDays, d.StaleAfterDays)
	o.FetchTimeout = cmp.Or(o.FetchTimeout, d.FetchTimeout)
	o.BackoffBase = cmp.Or(o.BackoffBase, d.BackoffBase)
	o.BackoffMax = cmp.Or(o.BackoffMax, d.BackoffMax)

	errs := []error{
		check(o.RefreshInterval < 0, "--exchangerate-refresh-interval must be positive, got %s", o.RefreshInterval),
		check(o.StaleAfterDays < 0, "--exchangerate-stale-after-days must be positive, got %d", o.StaleAfterDays),
		check(o.FetchTimeout < 0, "--exchangerate-fetch-timeout must be positive, got %s", o.FetchTimeout),
		check(o.BackoffBase < 0 || o.BackoffMax < o.BackoffBase,
			"--exchangerate-backoff-base (%s) must be positive and at most --exchangerate-backoff-max (%s)", o.BackoffBase, o.BackoffMax),
		check(o.MaxSources < 0, "--exchangerate-max-sources must be positive, got %d", o.MaxSources),
	}
	_, err := o.defaultSources()
	errs = append(errs, err)
	// Every service's URL, whether the defaults use it or not: an ExchangeRate may name any.
	for _, typ := range []string{SourceECB, SourceFrankfurter} {
		_, err := NewSource(typ, o.urlFor(typ), http.DefaultClient)
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func check(bad bool, format string, args ...any) error {
	if !bad {
		return nil
	}
	return fmt.Errorf(format, args...)
}

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

// urlFor is a source type's base URL: --exchangerate-url for the first default's service.
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
