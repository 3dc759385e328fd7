package exchangerate

import (
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	operatorsv1 "github.com/quartet-operator/quartet/api/operators/v1"
)

// Condition types.
const (
	// ConditionReady: the ConfigMap holds the rate for the current spec.
	ConditionReady = "Ready"
	// ConditionStale: the rate's publication date is older than the manager's limit.
	ConditionStale = "Stale"
	// ConditionDegraded: the last fetch from the source failed (the last good rate stays).
	ConditionDegraded = "Degraded"
)

// Condition reasons (the Upstream* reasons of failed fetches are in source.go).
const (
	ReasonReconciling        = "Reconciling"
	ReasonRateWritten        = "RateWritten"
	ReasonUnknownCurrency    = "UnknownCurrency"
	ReasonRateUnavailable    = "RateUnavailable"
	ReasonConfigMapConflict  = "ConfigMapConflict"
	ReasonConfigMapFailed    = "ConfigMapWriteFailed"
	ReasonFetchSucceeded     = "FetchSucceeded"
	ReasonPublicationCurrent = "PublicationCurrent"
	ReasonPublicationOld     = "PublicationOld"
	ReasonNoPublication      = "NoPublication"
)

// errConfigMapConflict marks a ConfigMap of the CR's name that another owner (or nobody)
// controls: we do not take over someone else's data.
var errConfigMapConflict = errors.New("ConfigMap exists and is not controlled by this ExchangeRate")

// outcome is everything one pass learned; computeStatus turns it into status.
type outcome struct {
	Now        time.Time
	Generation int64
	// Fetch is the shared cache's answer.
	Fetch Snapshot
	// Quote is the rate now in the ConfigMap for the current spec; nil when none was written.
	Quote *Quote
	// QuoteErr is why no quote exists although the source answered (*UnknownCurrencyError).
	QuoteErr error
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
// an unchanged refresh writes nothing to the API server (patchStatus skips equal
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
		newRate := st.Rate != o.Quote.Rate || st.PublicationDate != o.Quote.Date || st.Source != o.Quote.Source
		if (newRate || st.LastSuccessfulFetch == nil) && !o.Fetch.FetchedAt.IsZero() {
			t := metav1.NewTime(o.Fetch.FetchedAt.Truncate(time.Second))
			st.LastSuccessfulFetch = &t
		}
		st.Rate, st.PublicationDate, st.Source = o.Quote.Rate, o.Quote.Date, o.Quote.Source
		st.ConfigMapName = o.ConfigMapName
	}

	// Ready
	var unknown *UnknownCurrencyError
	switch {
	case o.Quote != nil && o.ConfigMapErr == nil:
		set(ConditionReady, metav1.ConditionTrue, ReasonRateWritten, fmt.Sprintf("ConfigMap %s holds %s %s per %s, published %s by %s",
			o.ConfigMapName, o.Quote.Rate, o.Quote.Currency, o.Quote.Base, o.Quote.Date, o.Quote.Source))
	case errors.As(o.QuoteErr, &unknown):
		set(ConditionReady, metav1.ConditionFalse, ReasonUnknownCurrency, unknown.Error()+"; waiting for the spec to change")
	case errors.Is(o.ConfigMapErr, errConfigMapConflict):
		set(ConditionReady, metav1.ConditionFalse, ReasonConfigMapConflict, fmt.Sprintf(
			"ConfigMap %s exists and is not controlled by this ExchangeRate; delete or rename it, or rename the ExchangeRate", o.ConfigMapName))
	case o.ConfigMapErr != nil:
		set(ConditionReady, metav1.ConditionFalse, ReasonConfigMapFailed, fmt.Sprintf("writing ConfigMap %s: %v", o.ConfigMapName, o.ConfigMapErr))
	case o.QuoteErr != nil:
		set(ConditionReady, metav1.ConditionFalse, ReasonRateUnavailable, o.QuoteErr.Error())
	case o.Fetch.Err != nil:
		set(ConditionReady, metav1.ConditionFalse, ReasonRateUnavailable, "no rate yet: "+o.Fetch.Err.Error())
	default:
		set(ConditionReady, metav1.ConditionUnknown, ReasonReconciling, "waiting for the first rate")
	}

	// Degraded
	if o.Fetch.Err != nil {
		reason := ReasonUpstreamUnreachable
		var fe *FetchError
		if errors.As(o.Fetch.Err, &fe) {
			reason = fe.Reason
		}
		kept := "no rate has been fetched yet"
		if st.Rate != "" {
			kept = fmt.Sprintf("keeping rate %s published %s", st.Rate, st.PublicationDate)
		}
		// No next-attempt time: it moves with every retry, and the message with it would
		// write every ExchangeRate's status once per attempt of an outage. The backoff flags
		// say when the attempts come.
		set(ConditionDegraded, metav1.ConditionTrue, reason, fmt.Sprintf("%v; %s; retrying with backoff", o.Fetch.Err, kept))
	} else if o.Fetch.Table != nil {
		set(ConditionDegraded, metav1.ConditionFalse, ReasonFetchSucceeded, fmt.Sprintf("the last fetch from %s succeeded", o.Fetch.Table.Source))
	} else {
		set(ConditionDegraded, metav1.ConditionUnknown, ReasonReconciling, "no fetch has finished yet")
	}

	// Stale: about the rate the ConfigMap holds. The messages name the day it turns Stale,
	// not the age, which would change the message (and write the status) every day.
	if age, ok := publicationAgeDays(st.PublicationDate, o.Now); !ok {
		set(ConditionStale, metav1.ConditionUnknown, ReasonNoPublication, "no rate has been published to the ConfigMap yet")
	} else if from := staleFrom(st.PublicationDate, o.StaleAfterDays); age > o.StaleAfterDays {
		set(ConditionStale, metav1.ConditionTrue, ReasonPublicationOld, fmt.Sprintf(
			"the rate was published %s, more than %d days ago: Stale since %s (UTC)", st.PublicationDate, o.StaleAfterDays, from))
	} else {
		set(ConditionStale, metav1.ConditionFalse, ReasonPublicationCurrent, fmt.Sprintf(
			"the rate was published %s; the limit is %d days: Stale from %s (UTC) unless a newer rate arrives",
			st.PublicationDate, o.StaleAfterDays, from))
	}

	// The status describes this generation unless an API error cut the pass short: exactly
	// the passes for which Reconcile returns an error (a conflict is the user's to resolve and
	// returns none), so observedGeneration never claims a spec that was not acted on.
	if o.ConfigMapErr == nil || errors.Is(o.ConfigMapErr, errConfigMapConflict) {
		st.ObservedGeneration = o.Generation
	}
	return st
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
