package exchangerate

import (
	"errors"
	"fmt"
	"maps"
	"math/big"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	operatorsv1 "github.com/quartet-operator/quartet/api/operators/v1"
)

// jitterFraction spreads requeues over this share of the wait, so thousands of
// ExchangeRates do not write their ConfigMaps in the same second. The first one to wake
// refreshes the shared table; the rest find it fresh.
const jitterFraction = 0.1

// maxJitter bounds the jitter: the refresh after a publication should come soon after it,
// whatever the periodic interval (10 % of the default 6h would be 36 minutes).
const maxJitter = 10 * time.Minute

// minRequeue keeps a clock skew or an already-due retry from turning into a hot loop.
const minRequeue = time.Second

// defaultTolerance is the divergence tolerance of an ExchangeRate without
// spec.divergenceTolerance, 1 %: reference rates of the same day from different central
// banks differ by a few tenths of a percent (they fix at different times of day), and a
// broken source (a wrong table, a unit error, a stuck mirror) by far more. Currencies that
// move more than that in a day (and sources a day apart) want more.
var defaultTolerance = big.NewRat(1, 100)

// refreshInterval is the spec's interval, else the manager's default.
func refreshInterval(spec operatorsv1.ExchangeRateSpec, def time.Duration) time.Duration {
	if spec.RefreshInterval != nil && spec.RefreshInterval.Duration > 0 {
		return spec.RefreshInterval.Duration
	}
	return def
}

// nextRefresh returns when to look at an ExchangeRate again; 0 means not until it changes.
//   - unknown currency, or a source beyond the manager's limit: a spec mistake, wait for
//     the next edit;
//   - otherwise the earliest of its sources' next moments: after a failed fetch, when the
//     cache allows the next attempt; else when the source's table is due (dueAt: the
//     refresh interval, the source's next publication, a publication that is late).
//
// random returns a number in [0, 1).
func nextRefresh(o outcome, interval time.Duration, random func() float64) time.Duration {
	var unknown *UnknownCurrencyError
	var limit *SourceLimitError
	if errors.As(o.QuoteErr, &unknown) || errors.As(o.SourcesErr, &limit) {
		return 0
	}
	var at time.Time
	retry := false
	for i, a := range o.Sources {
		t, r := a.Snapshot.RetryAt, true
		if a.Snapshot.Err == nil {
			t, r = dueAt(a.Snapshot, a.Schedule, interval), false
		}
		if i == 0 || t.Before(at) {
			at, retry = t, r
		}
	}
	wait := max(at.Sub(o.Now), 0)
	// Jitter is a share of the whole period (not of what is left of it), so CRs that
	// reconcile at different moments still spread over the same window.
	period := interval
	if retry {
		period = wait
	}
	wait += time.Duration(random() * min(jitterFraction*float64(period), float64(maxJitter)))
	return max(wait, minRequeue)
}

// pricing is what the sources' tables say about a spec: each source's quote and whether it
// is fresh, and which of them the pass writes.
type pricing struct {
	// Quotes are the sources' quotes, in the sources' order; nil where a source has no
	// table yet or cannot price the spec.
	Quotes []*Quote
	// Fresh marks the sources whose last fetch succeeded with a quote not older than the
	// stale limit.
	Fresh []bool
	// Chosen is the index of the quote to write; -1 when there is none.
	Chosen int
	// Err is why no source prices the spec (unpricedError) once every source has a table;
	// nil while one has none yet.
	Err error
}

// unpricedError says that no source prices the spec: each source's reason.
type unpricedError []*UnknownCurrencyError

func (e unpricedError) Error() string {
	if len(e) == 1 {
		return e[0].Error()
	}
	parts := make([]string, len(e))
	what := "a rate for " + e[0].Code
	for i, u := range e {
		parts[i] = u.Error()
		if u.Code != e[0].Code {
			what = "rates for every currency of the spec"
		}
	}
	return fmt.Sprintf("no source publishes %s: %s", what, strings.Join(parts, "; "))
}

// Unwrap lets errors.As find the *UnknownCurrencyError.
func (e unpricedError) Unwrap() []error {
	out := make([]error, len(e))
	for i, u := range e {
		out[i] = u
	}
	return out
}

// priceSpec prices the spec from every source's table and picks the rate to write: the
// first fresh source's (its last fetch succeeded and its publication is at most
// staleAfterDays old); when none is fresh (an outage of all, or all old), the most recent
// publication any source gave, the first of equals. A source keeps its last good table
// through failures, so a pass always has the best rate known.
func priceSpec(answers []sourceAnswer, spec operatorsv1.ExchangeRateSpec, now time.Time, staleAfterDays int) pricing {
	p := pricing{Quotes: make([]*Quote, len(answers)), Fresh: make([]bool, len(answers)), Chosen: -1}
	var unpriced unpricedError
	allTables := true
	for i, a := range answers {
		q, err := quoteFor(a.Snapshot.Table, spec)
		var unknown *UnknownCurrencyError
		switch {
		case errors.As(err, &unknown):
			unpriced = append(unpriced, unknown)
		case a.Snapshot.Table == nil:
			allTables = false
		}
		if q == nil {
			continue
		}
		p.Quotes[i] = q
		age, ok := publicationAgeDays(q.Date, now)
		p.Fresh[i] = a.Snapshot.Err == nil && ok && age <= staleAfterDays
	}
	for i, q := range p.Quotes {
		if q != nil && p.Fresh[i] {
			p.Chosen = i
			return p
		}
	}
	for i, q := range p.Quotes {
		if q != nil && (p.Chosen < 0 || q.Date > p.Quotes[p.Chosen].Date) {
			p.Chosen = i
		}
	}
	if p.Chosen < 0 && allTables && len(unpriced) > 0 {
		p.Err = unpriced
	}
	return p
}

// verdict is the content of a condition, as a decision gives it to computeStatus.
type verdict struct {
	Status          metav1.ConditionStatus
	Reason, Message string
}

// maxListed bounds the disagreements a Divergent message lists.
const maxListed = 5

// crossCheck compares the rate written with every other fresh source's, currency by
// currency, against tolerance (a fraction: 1/100 is 1 %). The message of agreement names no
// rates, so that it does not change (and cost a status write) with every publication; a
// disagreement names them, for the human who must judge it.
func crossCheck(names []string, p pricing, tolerance *big.Rat) verdict {
	limit := percent(tolerance)
	switch {
	case len(names) == 1:
		return verdict{metav1.ConditionFalse, operatorsv1.ReasonSingleSource, fmt.Sprintf("one source (%s): nothing to cross-check", names[0])}
	case p.Chosen < 0:
		return verdict{metav1.ConditionUnknown, operatorsv1.ReasonNotCompared, "no rate yet"}
	case !p.Fresh[p.Chosen]:
		return verdict{metav1.ConditionUnknown, operatorsv1.ReasonNotCompared, "no source gave a fresh rate to compare"}
	}
	chosen := p.Quotes[p.Chosen]
	var compared, silent, disagreements []string
	for i, q := range p.Quotes {
		if i == p.Chosen {
			continue
		}
		if q == nil || !p.Fresh[i] {
			silent = append(silent, names[i])
			continue
		}
		compared = append(compared, names[i])
		theirs := q.byCurrency()
		for _, c := range chosen.list() {
			diff := relativeDifference(theirs[c.Currency], c.Rate)
			if diff == nil || diff.Cmp(tolerance) <= 0 {
				continue
			}
			disagreements = append(disagreements, fmt.Sprintf("%s says %s %s (published %s), %s from %s's %s (published %s)",
				names[i], c.Currency, theirs[c.Currency], q.Date, percent(diff), names[p.Chosen], c.Rate, chosen.Date))
		}
	}
	switch {
	case len(disagreements) > 0:
		more := ""
		if n := len(disagreements) - maxListed; n > 0 {
			disagreements, more = disagreements[:maxListed], fmt.Sprintf(" and %d more", n)
		}
		return verdict{metav1.ConditionTrue, operatorsv1.ReasonSourcesDisagree, fmt.Sprintf("%s%s; the tolerance is %s",
			strings.Join(disagreements, "; "), more, limit)}
	case len(compared) == 0:
		return verdict{metav1.ConditionUnknown, operatorsv1.ReasonNotCompared, fmt.Sprintf("%s gave no fresh rate to compare with %s's",
			strings.Join(silent, " and "), names[p.Chosen])}
	}
	msg := fmt.Sprintf("%s agree with %s within %s", strings.Join(compared, " and "), names[p.Chosen], limit)
	if len(compared) == 1 {
		msg = fmt.Sprintf("%s agrees with %s within %s", compared[0], names[p.Chosen], limit)
	}
	if len(silent) > 0 {
		msg += fmt.Sprintf("; %s gave no fresh rate", strings.Join(silent, " and "))
	}
	return verdict{metav1.ConditionFalse, operatorsv1.ReasonSourcesAgree, msg}
}

// sourceNames are the answers' source names, in order.
func sourceNames(answers []sourceAnswer) []string {
	out := make([]string, len(answers))
	for i, a := range answers {
		out[i] = a.Name
	}
	return out
}

// relativeDifference is |theirs - ours| / ours; nil when either is not a rate.
func relativeDifference(theirs, ours string) *big.Rat {
	t, okT := new(big.Rat).SetString(theirs)
	o, okO := new(big.Rat).SetString(ours)
	if !okT || !okO || o.Sign() <= 0 {
		return nil
	}
	d := new(big.Rat).Sub(t, o)
	return d.Abs(d).Quo(d, o)
}

// percent formats a fraction as a percentage with at most three significant digits (7.5%).
func percent(r *big.Rat) string {
	p := new(big.Rat).Mul(r, big.NewRat(100, 1))
	if p.Sign() == 0 {
		return "0%"
	}
	return roundSignificant(p, 3) + "%"
}

// toleranceOf is spec.divergenceTolerance as a fraction, defaultTolerance when unset (the
// API server refuses a malformed one).
func toleranceOf(spec operatorsv1.ExchangeRateSpec) *big.Rat {
	v, ok := strings.CutSuffix(spec.DivergenceTolerance, "%")
	r, parsed := new(big.Rat).SetString(v)
	if !ok || !parsed || r.Sign() < 0 {
		return defaultTolerance
	}
	return r.Quo(r, big.NewRat(100, 1))
}

// controlledBy reports whether obj's controller reference points at xr (by UID, so a
// ConfigMap left by a deleted ExchangeRate of the same name does not count).
func controlledBy(obj metav1.Object, xr *operatorsv1.ExchangeRate) bool {
	ref := metav1.GetControllerOf(obj)
	return ref != nil && ref.UID == xr.UID
}

// configMapUpToDate reports whether existing already is desired in everything we own:
// the label, the data and the controller reference.
func configMapUpToDate(existing, desired *corev1.ConfigMap, xr *operatorsv1.ExchangeRate) bool {
	return existing.Labels[managedByLabel] == managedByValue &&
		controlledBy(existing, xr) &&
		maps.Equal(existing.Data, desired.Data) &&
		len(existing.BinaryData) == 0
}

// routineUpdate reports whether a ConfigMap update only brings a new table from the source:
// the spec is unchanged since the last pass without error, and the ConfigMap holds what
// that pass wrote (the rates and publication date in status, the same keys, base, currency
// and source). Such an update is the controller's everyday work, shown by the ConfigMap and
// the status; it sends no Event, so a new publication costs one ConfigMap write and one
// status write per ExchangeRate. A spec change, a change of source (a failover) or a
// ConfigMap someone else edited is not routine.
func routineUpdate(existing, desired *corev1.ConfigMap, xr *operatorsv1.ExchangeRate) bool {
	if xr.Generation != xr.Status.ObservedGeneration ||
		existing.Data[KeyDate] != xr.Status.PublicationDate ||
		len(existing.Data) != len(desired.Data) ||
		existing.Data[KeyBase] != desired.Data[KeyBase] ||
		existing.Data[KeySource] != desired.Data[KeySource] {
		return false
	}
	if len(xr.Spec.Currencies) == 0 {
		return xr.Status.Rate != "" && existing.Data[KeyRate] == xr.Status.Rate &&
			existing.Data[KeyCurrency] == desired.Data[KeyCurrency]
	}
	if len(xr.Status.Rates) != len(xr.Spec.Currencies) {
		return false
	}
	for _, r := range xr.Status.Rates {
		if _, wanted := desired.Data[r.Currency]; !wanted || existing.Data[r.Currency] != r.Rate {
			return false
		}
	}
	return true
}

// heldQuote returns the quote the ConfigMap holds when writing q would step it back to an
// older publication of the same source, and nil otherwise. The RateCache refuses an answer
// older than the table it holds (a mirror behind a load balancer), but only within one
// process: after a restart, or once a source's cache was dropped at the source limit, its
// first answer has nothing to compare with. The ConfigMap remembers: it holds back when it
// is this ExchangeRate's, its last write was ours (a hand edit is put back, never kept), it
// holds exactly what desiredConfigMap makes of a quote with q's base, source and currencies,
// and its date is later than q's.
func heldQuote(existing *corev1.ConfigMap, xr *operatorsv1.ExchangeRate, q *Quote) *Quote {
	d := existing.Data
	if !controlledBy(existing, xr) || !lastWriteOurs(existing) || len(existing.BinaryData) != 0 ||
		d[KeySource] != q.Source || d[KeyBase] != q.Base || d[KeyDate] <= q.Date {
		return nil
	}
	held := &Quote{Base: q.Base, Date: d[KeyDate], Source: q.Source, Currency: q.Currency}
	if q.Rates == nil {
		held.Rate = d[KeyRate]
	} else {
		held.Rates = make([]operatorsv1.CurrencyRate, len(q.Rates))
		for i, r := range q.Rates {
			held.Rates[i] = operatorsv1.CurrencyRate{Currency: r.Currency, Rate: d[r.Currency]}
		}
	}
	for _, r := range held.list() {
		if r.Rate == "" {
			return nil
		}
	}
	if !maps.Equal(desiredConfigMap(xr, *held).Data, d) {
		return nil
	}
	return held
}

// lastWriteOurs reports whether the newest managedFields entry of obj is our field
// manager's, i.e. the last change to the object was ours. A tie with another manager
// counts as not ours, so an edit is never missed.
func lastWriteOurs(obj metav1.Object) bool {
	var newest time.Time
	ours := false
	for _, e := range obj.GetManagedFields() {
		if e.Time == nil {
			continue
		}
		switch t := e.Time.Time; {
		case t.After(newest):
			newest, ours = t, e.Manager == FieldOwner
		case t.Equal(newest):
			ours = ours && e.Manager == FieldOwner
		}
	}
	return ours
}
