package exchangerate

import (
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	operatorsv1 "github.com/quartet-operator/quartet/api/operators/v1"
)

// errConfigMapConflict marks a ConfigMap of the CR's name that another owner (or nobody)
// controls: we do not take over someone else's data.
var errConfigMapConflict = errors.New("ConfigMap exists and is not controlled by this ExchangeRate")

// sourceAnswer is one source's part in a pass: its shared cache's answer.
type sourceAnswer struct {
	Name     string
	Schedule Schedule
	Snapshot Snapshot
}

// outcome is everything one pass learned; computeStatus turns it into status.
type outcome struct {
	Now        time.Time
	Generation int64
	// Sources are the answers of the ExchangeRate's sources, in its order of preference.
	Sources []sourceAnswer
	// SourcesErr is why the spec's sources could not be had (*SourceLimitError); Sources is
	// empty then.
	SourcesErr error
	// Quote is the rate now in the ConfigMap for the current spec; nil when none was written.
	Quote *Quote
	// QuoteErr is why no quote exists although every source answered (an unpricedError,
	// which wraps *UnknownCurrencyError).
	QuoteErr error
	// Pricing is what the sources' tables said about the spec (priceSpec), and Tolerance
	// spec.divergenceTolerance as a fraction (nil: the default): the cross-check's input.
	Pricing   pricing
	Tolerance *big.Rat
	// ConfigMapErr is why the ConfigMap could not be written (errConfigMapConflict or an API error).
	ConfigMapErr  error
	ConfigMapName string
	// StaleAfterDays is how many days old a publication may be before it is Stale.
	StaleAfterDays int
}

// computeStatus returns the status for o, keeping the last good rate when this pass
// wrote none. Condition transition times come from o.Now.
//
// The status is a function of state, never of the clock alone: a pass that learns
// nothing new (a 304, or the same rates and publication date) returns prev unchanged, so
// an unchanged refresh writes nothing to the API server (writeStatus skips equal
// statuses). Hence no fetch or check time, no age in days and no next-attempt time in any
// field or message: each would change on every refresh and cost one status write per
// ExchangeRate for nothing. When the source last answered is the per-source metric
// quartet_exchangerate_last_successful_fetch_timestamp_seconds, one series for all
// ExchangeRates; lastSuccessfulFetch is when the rate in status was fetched and moves
// only with the rate.
func computeStatus(prev operatorsv1.ExchangeRateStatus, o outcome) operatorsv1.ExchangeRateStatus {
	st := *prev.DeepCopy()
	now := metav1.NewTime(o.Now.Truncate(time.Second))
	set := func(typ string, status metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: typ, Status: status, Reason: reason,
			Message: msg, ObservedGeneration: o.Generation, LastTransitionTime: now})
	}

	if o.Quote != nil {
		// lastSuccessfulFetch is the time of the fetch that brought the rate now in status (the
		// 200 that sent its table), so it changes with the rate and with nothing else: a 304, or
		// a later fetch of the same publication, confirms the rate without bringing it.
		newRate := st.Rate != o.Quote.Rate || !slices.Equal(st.Rates, o.Quote.Rates) ||
			st.PublicationDate != o.Quote.Date || st.Source != o.Quote.Source
		if fetched := o.fetchedAt(o.Quote.Source); (newRate || st.LastSuccessfulFetch == nil) && !fetched.IsZero() {
			t := metav1.NewTime(fetched.Truncate(time.Second))
			st.LastSuccessfulFetch = &t
		}
		st.Rate, st.Rates, st.PublicationDate, st.Source = o.Quote.Rate, slices.Clone(o.Quote.Rates), o.Quote.Date, o.Quote.Source
		st.ConfigMapName = o.ConfigMapName
	}
	fetchErr := o.fetchErr()

	// Ready
	var unknown *UnknownCurrencyError
	switch {
	case o.SourcesErr != nil:
		set(operatorsv1.ConditionReady, metav1.ConditionFalse, operatorsv1.ReasonTooManySources, o.SourcesErr.Error()+"; tried again at every refresh, when a source no ExchangeRate names any more can give its place")
	case o.Quote != nil && o.ConfigMapErr == nil:
		set(operatorsv1.ConditionReady, metav1.ConditionTrue, operatorsv1.ReasonRateWritten, fmt.Sprintf("ConfigMap %s holds %s, published %s by %s",
			o.ConfigMapName, o.Quote.describe(), o.Quote.Date, o.Quote.Source))
	case errors.As(o.QuoteErr, &unknown):
		set(operatorsv1.ConditionReady, metav1.ConditionFalse, operatorsv1.ReasonUnknownCurrency, o.QuoteErr.Error()+"; waiting for the spec to change")
	case errors.Is(o.ConfigMapErr, errConfigMapConflict):
		set(operatorsv1.ConditionReady, metav1.ConditionFalse, operatorsv1.ReasonConfigMapConflict, fmt.Sprintf(
			"ConfigMap %s exists and is not controlled by this ExchangeRate; delete or rename it, or rename the ExchangeRate", o.ConfigMapName))
	case o.ConfigMapErr != nil:
		set(operatorsv1.ConditionReady, metav1.ConditionFalse, operatorsv1.ReasonConfigMapWriteFailed, fmt.Sprintf("writing ConfigMap %s: %v", o.ConfigMapName, o.ConfigMapErr))
	case o.QuoteErr != nil:
		set(operatorsv1.ConditionReady, metav1.ConditionFalse, operatorsv1.ReasonRateUnavailable, o.QuoteErr.Error())
	case fetchErr != nil:
		set(operatorsv1.ConditionReady, metav1.ConditionFalse, operatorsv1.ReasonRateUnavailable, "no rate yet: "+fetchErr.Error())
	default:
		set(operatorsv1.ConditionReady, metav1.ConditionUnknown, operatorsv1.ReasonReconciling, "waiting for the first rate")
	}

	// Degraded
	var failing, succeeded []string
	for _, a := range o.Sources {
		switch {
		case a.Snapshot.Err != nil:
			failing = append(failing, a.Name)
		case a.Snapshot.Table != nil:
			succeeded = append(succeeded, a.Name)
		}
	}
	switch {
	case o.SourcesErr != nil:
		set(operatorsv1.ConditionDegraded, metav1.ConditionUnknown, operatorsv1.ReasonTooManySources, "no source fetched: the spec names one the manager cannot add")
	case fetchErr != nil:
		reason := operatorsv1.ReasonUpstreamUnreachable
		var fe *FetchError
		if errors.As(fetchErr, &fe) {
			reason = fe.Reason
		}
		kept := "no rate has been fetched yet"
		switch {
		case st.Source != "" && !slices.Contains(failing, st.Source):
			kept = "the rate is " + st.Source + "'s"
		case st.Rate != "":
			kept = fmt.Sprintf("keeping rate %s published %s", st.Rate, st.PublicationDate)
		case st.PublicationDate != "":
			kept = "keeping the rates published " + st.PublicationDate
		}
		// No next-attempt time: it moves with every retry, and the message with it would
		// write every ExchangeRate's status once per attempt of an outage. The backoff flags
		// say when the attempts come.
		set(operatorsv1.ConditionDegraded, metav1.ConditionTrue, reason, fmt.Sprintf("%v; %s; retrying with backoff", fetchErr, kept))
	case len(succeeded) == 1:
		set(operatorsv1.ConditionDegraded, metav1.ConditionFalse, operatorsv1.ReasonFetchSucceeded, fmt.Sprintf("the last fetch from %s succeeded", succeeded[0]))
	case len(succeeded) > 1:
		set(operatorsv1.ConditionDegraded, metav1.ConditionFalse, operatorsv1.ReasonFetchSucceeded, fmt.Sprintf("the last fetches from %s succeeded", strings.Join(succeeded, " and ")))
	default:
		set(operatorsv1.ConditionDegraded, metav1.ConditionUnknown, operatorsv1.ReasonReconciling, "no fetch has finished yet")
	}

	// Divergent
	if o.SourcesErr != nil || len(o.Sources) == 0 {
		set(operatorsv1.ConditionDivergent, metav1.ConditionUnknown, operatorsv1.ReasonNotCompared, "no source fetched")
	} else {
		tolerance := o.Tolerance
		if tolerance == nil {
			tolerance = defaultTolerance
		}
		v := crossCheck(sourceNames(o.Sources), o.Pricing, tolerance)
		set(operatorsv1.ConditionDivergent, v.Status, v.Reason, v.Message)
	}

	// Stale: about the rate the ConfigMap holds. The messages name the day it turns Stale,
	// not the age, which would change the message (and write the status) every day.
	if age, ok := publicationAgeDays(st.PublicationDate, o.Now); !ok {
		set(operatorsv1.ConditionStale, metav1.ConditionUnknown, operatorsv1.ReasonNoPublication, "no rate has been published to the ConfigMap yet")
	} else if from := staleFrom(st.PublicationDate, o.StaleAfterDays); age > o.StaleAfterDays {
		set(operatorsv1.ConditionStale, metav1.ConditionTrue, operatorsv1.ReasonPublicationOld, fmt.Sprintf(
			"the rate was published %s, more than %d days ago: Stale since %s (UTC)", st.PublicationDate, o.StaleAfterDays, from))
	} else {
		set(operatorsv1.ConditionStale, metav1.ConditionFalse, operatorsv1.ReasonPublicationCurrent, fmt.Sprintf(
			"the rate was published %s; the limit is %d days: Stale from %s (UTC) unless a newer rate arrives",
			st.PublicationDate, o.StaleAfterDays, from))
	}

	if o.actedOn() {
		st.ObservedGeneration = o.Generation
	}
	return st
}

// actedOn reports whether the pass acted on the spec fully, so that observedGeneration
// may claim it (docs/STYLE.md, "Status writes and observedGeneration"): the ConfigMap holds
// the spec's rate, or the spec asks for what the controller will not retry (too many
// sources, a currency no source prices, a ConfigMap of the name it does not control: the
// user's to change; Ready says what). A pass that could not write the ConfigMap (an API
// error: Reconcile returns it) or has no rate yet because the sources failed or have not
// answered (retried with backoff) did not.
func (o outcome) actedOn() bool {
	switch {
	case o.SourcesErr != nil, o.QuoteErr != nil, errors.Is(o.ConfigMapErr, errConfigMapConflict):
		return true
	case o.ConfigMapErr != nil:
		return false
	}
	return o.Quote != nil
}

// fetchErr is why the sources' last fetches failed: the one error of a single source, as
// it is; of several sources, each failing one's error after its name. nil when none failed.
func (o outcome) fetchErr() error {
	var errs []error
	for _, a := range o.Sources {
		if a.Snapshot.Err == nil {
			continue
		}
		if len(o.Sources) == 1 {
			return a.Snapshot.Err
		}
		errs = append(errs, &sourceError{source: a.Name, err: a.Snapshot.Err})
	}
	if len(errs) == 0 {
		return nil
	}
	return joinedErrors(errs)
}

// fetchedAt is when the named source sent the table it holds; zero when it is not one of
// the pass's sources.
func (o outcome) fetchedAt(source string) time.Time {
	for _, a := range o.Sources {
		if a.Name == source {
			return a.Snapshot.FetchedAt
		}
	}
	return time.Time{}
}

// sourceError is a fetch error with the name of its source in front.
type sourceError struct {
	source string
	err    error
}

func (e *sourceError) Error() string { return e.source + ": " + e.err.Error() }
func (e *sourceError) Unwrap() error { return e.err }

// joinedErrors are errors joined with "; " (errors.Join uses newlines, which read badly in
// a condition's message); errors.As finds the first's.
type joinedErrors []error

func (e joinedErrors) Error() string {
	parts := make([]string, len(e))
	for i, err := range e {
		parts[i] = err.Error()
	}
	return strings.Join(parts, "; ")
}

func (e joinedErrors) Unwrap() []error { return e }

// describe says what the quote holds: "1.1625 USD per EUR", or "2 rates per EUR (USD
// 1.1625, GBP 0.86485)".
func (q *Quote) describe() string {
	if q.Rates == nil {
		return fmt.Sprintf("%s %s per %s", q.Rate, q.Currency, q.Base)
	}
	parts := make([]string, len(q.Rates))
	for i, r := range q.Rates {
		parts[i] = r.Currency + " " + r.Rate
	}
	return fmt.Sprintf("%d rates per %s (%s)", len(q.Rates), q.Base, strings.Join(parts, ", "))
}

// staleFrom is the first day (UTC, YYYY-MM-DD) on which a rate published on date is
// Stale: more than limit whole days after it. date is valid (publicationAgeDays parsed it).
func staleFrom(date string, limit int) string {
	d, _ := time.Parse(dateLayout, date)
	return d.AddDate(0, 0, limit+1).Format(dateLayout)
}

// publicationAgeDays is the number of whole calendar days (UTC) between the publication
// date and now.
func publicationAgeDays(date string, now time.Time) (int, bool) {
	d, err := time.Parse(dateLayout, date)
	if err != nil {
		return 0, false
	}
	n := now.UTC()
	today := time.Date(n.Year(), n.Month(), n.Day(), 0, 0, 0, 0, time.UTC)
	return int(today.Sub(d).Hours() / 24), true
}
