package exchangerate

import (
	"cmp"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	operatorsv1 "github.com/quartet-operator/quartet/api/operators/v1"
	"github.com/quartet-operator/quartet/internal/status"
)

// errConfigMapConflict marks a ConfigMap of the name that we do not control: not ours to take.
var errConfigMapConflict = errors.New("ConfigMap exists and is not controlled by this ExchangeRate")

// sourceAnswer is one source's part in a pass: its shared cache's answer.
type sourceAnswer struct {
	Name     string
	Schedule Schedule
	Snapshot Snapshot
}

// outcome is everything one pass learned; computeStatus turns it into status.
type outcome struct {
	Now            time.Time
	Generation     int64
	Sources        []sourceAnswer // in the spec's order; none with SourcesErr
	SourcesErr     error
	Quote          *Quote // the rate now in the ConfigMap; nil: none written (QuoteErr: none priced)
	QuoteErr       error
	Pricing        pricing // with Tolerance, the cross-check's input
	Tolerance      *big.Rat
	ConfigMapErr   error // why the ConfigMap could not be written: errConfigMapConflict or an API error
	ConfigMapName  string
	StaleAfterDays int
}

// computeStatus returns the status for o, keeping the last good rate (observedGeneration is
// Finish's). A function of state, not of the clock: no time, age or next attempt in it, so a
// pass that learns nothing new writes nothing (docs/exchangerate.md, "Status").
func computeStatus(prev operatorsv1.ExchangeRateStatus, o outcome) operatorsv1.ExchangeRateStatus {
	st := *prev.DeepCopy()
	if q := o.Quote; q != nil {
		// lastSuccessfulFetch is when the 200 that brought the rate came: it moves with it only.
		newRate := st.Rate != q.Rate || !slices.Equal(st.Rates, q.Rates) || st.PublicationDate != q.Date || st.Source != q.Source
		if fetched := o.fetchedAt(q.Source); (newRate || st.LastSuccessfulFetch == nil) && !fetched.IsZero() {
			t := metav1.NewTime(fetched.Truncate(time.Second))
			st.LastSuccessfulFetch = &t
		}
		st.Rate, st.Rates, st.PublicationDate, st.Source = q.Rate, slices.Clone(q.Rates), q.Date, q.Source
		st.ConfigMapName = o.ConfigMapName
	}
	c := status.NewConditions(&st.Conditions, o.Generation, o.Now)
	set := func(typ string, v verdict) { c.Set(typ, v.Status, v.Reason, v.Message) }
	set(operatorsv1.ConditionReady, o.ready())
	set(operatorsv1.ConditionDegraded, o.degraded(st))
	set(operatorsv1.ConditionDivergent, o.divergent())
	set(operatorsv1.ConditionStale, o.stale(st.PublicationDate))
	return st
}

// ready says whether the ConfigMap holds the spec's rate, else why not.
func (o outcome) ready() verdict {
	var unknown *UnknownCurrencyError
	switch {
	case o.SourcesErr != nil:
		return verdict{metav1.ConditionFalse, operatorsv1.ReasonTooManySources,
			o.SourcesErr.Error() + "; tried again at every refresh, when a source no ExchangeRate names any more can give its place"}
	case o.Quote != nil && o.ConfigMapErr == nil:
		return verdict{metav1.ConditionTrue, operatorsv1.ReasonRateWritten, fmt.Sprintf("ConfigMap %s holds %s, published %s by %s",
			o.ConfigMapName, o.Quote.describe(), o.Quote.Date, o.Quote.Source)}
	case errors.As(o.QuoteErr, &unknown):
		return verdict{metav1.ConditionFalse, operatorsv1.ReasonUnknownCurrency, o.QuoteErr.Error() + "; waiting for the spec to change"}
	case errors.Is(o.ConfigMapErr, errConfigMapConflict):
		return verdict{metav1.ConditionFalse, operatorsv1.ReasonConfigMapConflict, fmt.Sprintf(
			"ConfigMap %s exists and is not controlled by this ExchangeRate; delete or rename it, or rename the ExchangeRate", o.ConfigMapName)}
	case o.ConfigMapErr != nil:
		return verdict{metav1.ConditionFalse, operatorsv1.ReasonConfigMapWriteFailed, fmt.Sprintf("writing ConfigMap %s: %v", o.ConfigMapName, o.ConfigMapErr)}
	case o.QuoteErr != nil:
		return verdict{metav1.ConditionFalse, operatorsv1.ReasonRateUnavailable, o.QuoteErr.Error()}
	case o.fetchErr() != nil:
		return verdict{metav1.ConditionFalse, operatorsv1.ReasonRateUnavailable, "no rate yet: " + o.fetchErr().Error()}
	}
	return verdict{metav1.ConditionUnknown, operatorsv1.ReasonReconciling, "waiting for the first rate"}
}

// degraded says whether the sources' last fetches failed, and which rate st keeps meanwhile.
func (o outcome) degraded(st operatorsv1.ExchangeRateStatus) verdict {
	var failing, succeeded []string
	for _, a := range o.Sources {
		switch {
		case a.Snapshot.Err != nil:
			failing = append(failing, a.Name)
		case a.Snapshot.Table != nil:
			succeeded = append(succeeded, a.Name)
		}
	}
	fetchErr := o.fetchErr()
	switch {
	case o.SourcesErr != nil:
		return verdict{metav1.ConditionUnknown, operatorsv1.ReasonTooManySources, "no source fetched: the spec names one the manager cannot add"}
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
		// No next-attempt time: it would write every ExchangeRate's status at every retry.
		return verdict{metav1.ConditionTrue, reason, fmt.Sprintf("%v; %s; retrying with backoff", fetchErr, kept)}
	case len(succeeded) == 1:
		return verdict{metav1.ConditionFalse, operatorsv1.ReasonFetchSucceeded, fmt.Sprintf("the last fetch from %s succeeded", succeeded[0])}
	case len(succeeded) > 1:
		return verdict{metav1.ConditionFalse, operatorsv1.ReasonFetchSucceeded,
			fmt.Sprintf("the last fetches from %s succeeded", strings.Join(succeeded, " and "))}
	}
	return verdict{metav1.ConditionUnknown, operatorsv1.ReasonReconciling, "no fetch has finished yet"}
}

func (o outcome) divergent() verdict {
	if o.SourcesErr != nil || len(o.Sources) == 0 {
		return verdict{metav1.ConditionUnknown, operatorsv1.ReasonNotCompared, "no source fetched"}
	}
	names := make([]string, len(o.Sources))
	for i, a := range o.Sources {
		names[i] = a.Name
	}
	return crossCheck(names, o.Pricing, cmp.Or(o.Tolerance, defaultTolerance))
}

// stale names the day the rate turns Stale, not its age (which changes every day).
func (o outcome) stale(date string) verdict {
	age, ok := publicationAgeDays(date, o.Now)
	if !ok {
		return verdict{metav1.ConditionUnknown, operatorsv1.ReasonNoPublication, "no rate has been published to the ConfigMap yet"}
	}
	from := staleFrom(date, o.StaleAfterDays)
	if age > o.StaleAfterDays {
		return verdict{metav1.ConditionTrue, operatorsv1.ReasonPublicationOld, fmt.Sprintf(
			"the rate was published %s, more than %d days ago: Stale since %s (UTC)", date, o.StaleAfterDays, from)}
	}
	return verdict{metav1.ConditionFalse, operatorsv1.ReasonPublicationCurrent, fmt.Sprintf(
		"the rate was published %s; the limit is %d days: Stale from %s (UTC) unless a newer rate arrives", date, o.StaleAfterDays, from)}
}

// actedOn reports whether the pass acted on the spec fully: the ConfigMap holds its rate, or the
// spec is the user's to change (docs/STYLE.md, the one named exception, lists the cases).
func (o outcome) actedOn() bool {
	switch {
	case o.SourcesErr != nil, o.QuoteErr != nil, errors.Is(o.ConfigMapErr, errConfigMapConflict):
		return true
	case o.ConfigMapErr != nil:
		return false
	}
	return o.Quote != nil
}

// fetchErr is why the sources' last fetches failed; of several, each after its name.
func (o outcome) fetchErr() error {
	var errs []error
	for _, a := range o.Sources {
		if a.Snapshot.Err == nil {
			continue
		}
		if len(o.Sources) == 1 {
			return a.Snapshot.Err
		}
		errs = append(errs, fmt.Errorf("%s: %w", a.Name, a.Snapshot.Err))
	}
	if len(errs) == 0 {
		return nil
	}
	return joinedErrors(errs)
}

// fetchedAt is when the named source sent its table; zero for another source.
func (o outcome) fetchedAt(source string) time.Time {
	if i := slices.IndexFunc(o.Sources, func(a sourceAnswer) bool { return a.Name == source }); i >= 0 {
		return o.Sources[i].Snapshot.FetchedAt
	}
	return time.Time{}
}

// joinedErrors are errors joined with "; " (errors.Join's newlines read badly in a message).
type joinedErrors []error

func (e joinedErrors) Error() string {
	parts := make([]string, len(e))
	for i, err := range e {
		parts[i] = err.Error()
	}
	return strings.Join(parts, "; ")
}

func (e joinedErrors) Unwrap() []error { return e }

// describe says what the quote holds: "1.1625 USD per EUR", "2 rates per EUR (USD 1.1625, …)".
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

// staleFrom is the first day (UTC) a rate published on date (valid) is Stale.
func staleFrom(date string, limit int) string {
	d, _ := time.Parse(dateLayout, date)
	return d.AddDate(0, 0, limit+1).Format(dateLayout)
}

// publicationAgeDays is the number of whole calendar days (UTC) from date to now.
func publicationAgeDays(date string, now time.Time) (int, bool) {
	d, err := time.Parse(dateLayout, date)
	if err != nil {
		return 0, false
	}
	n := now.UTC()
	today := time.Date(n.Year(), n.Month(), n.Day(), 0, 0, 0, 0, time.UTC)
	return int(today.Sub(d).Hours() / 24), true
}
