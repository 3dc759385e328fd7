package exchangerate

import (
	"errors"
	"fmt"
	"maps"
	"math/big"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	operatorsv1 "github.com/quartet-operator/quartet/api/operators/v1"
)

// Requeue jitter: a share of the period (ExchangeRates do not all write in the same second),
// capped (the refresh after a publication comes soon); a floor against hot loops.
const (
	jitterFraction = 0.1
	maxJitter      = 10 * time.Minute
	minRequeue     = time.Second
	// maxListed bounds the disagreements a Divergent message lists.
	maxListed = 5
)

// defaultTolerance is 1 %: central banks' rates of a day differ by tenths of a percent.
var defaultTolerance = big.NewRat(1, 100)

func refreshInterval(spec operatorsv1.ExchangeRateSpec, def time.Duration) time.Duration {
	if spec.RefreshInterval != nil && spec.RefreshInterval.Duration > 0 {
		return spec.RefreshInterval.Duration
	}
	return def
}

// nextRefresh is the sources' earliest retry or due time (dueAt), jittered; 0 after a spec mistake.
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
	// A share of the whole period: passes at different moments spread over the same window.
	period := interval
	if retry {
		period = wait
	}
	wait += time.Duration(random() * min(jitterFraction*float64(period), float64(maxJitter)))
	return max(wait, minRequeue)
}

// pricing is each source's quote (or nil) and whether it is fresh (fetched, not stale), the
// index of the one to write (-1: none), and why no source prices the spec.
type pricing struct {
	Quotes []*Quote
	Fresh  []bool
	Chosen int
	Err    error
}

// unpricedError says that no source prices the spec: each source's reason.
type unpricedError []*UnknownCurrencyError

func (e unpricedError) Error() string {
	if len(e) == 1 {
		return e[0].Error()
	}
	what := "a rate for " + e[0].Code
	if slices.ContainsFunc(e, func(u *UnknownCurrencyError) bool { return u.Code != e[0].Code }) {
		what = "rates for every currency of the spec"
	}
	return fmt.Sprintf("no source publishes %s: %v", what, joinedErrors(e.Unwrap()))
}

// Unwrap lets errors.As find the *UnknownCurrencyError.
func (e unpricedError) Unwrap() []error {
	out := make([]error, len(e))
	for i, u := range e {
		out[i] = u
	}
	return out
}

// priceSpec prices the spec from every table and picks the first fresh rate, else the newest.
func priceSpec(answers []sourceAnswer, spec operatorsv1.ExchangeRateSpec, now time.Time, staleAfterDays int) pricing {
	p := pricing{Quotes: make([]*Quote, len(answers)), Fresh: make([]bool, len(answers)), Chosen: -1}
	var unpriced unpricedError
	allTables := true
	for i, a := range answers {
		q, err := quoteFor(a.Snapshot.Table, spec)
		var unknown *UnknownCurrencyError
		if errors.As(err, &unknown) {
			unpriced = append(unpriced, unknown)
		}
		allTables = allTables && a.Snapshot.Table != nil
		if q != nil {
			age, ok := publicationAgeDays(q.Date, now)
			p.Quotes[i], p.Fresh[i] = q, a.Snapshot.Err == nil && ok && age <= staleAfterDays
		}
	}
	if p.Chosen = slices.Index(p.Fresh, true); p.Chosen >= 0 { // a fresh one has a quote
		return p
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

// crossCheck compares the rate written with every other fresh source's against tolerance.
// An agreement names no rates (it would change with every publication); a disagreement does.
func crossCheck(names []string, p pricing, tolerance *big.Rat) verdict {
	switch {
	case len(names) == 1:
		return verdict{metav1.ConditionFalse, operatorsv1.ReasonSingleSource, fmt.Sprintf("one source (%s): nothing to cross-check", names[0])}
	case p.Chosen < 0:
		return verdict{metav1.ConditionUnknown, operatorsv1.ReasonNotCompared, "no rate yet"}
	case !p.Fresh[p.Chosen]:
		return verdict{metav1.ConditionUnknown, operatorsv1.ReasonNotCompared, "no source gave a fresh rate to compare"}
	}
	chosen, ours, limit := p.Quotes[p.Chosen], names[p.Chosen], percent(tolerance)
	var compared, silent, disagreements []string
	for i, q := range p.Quotes {
		switch {
		case i == p.Chosen:
			continue
		case q == nil || !p.Fresh[i]:
			silent = append(silent, names[i])
			continue
		}
		compared = append(compared, names[i])
		theirs := map[string]string{}
		for _, r := range q.list() {
			theirs[r.Currency] = r.Rate
		}
		for _, c := range chosen.list() {
			if diff := relativeDifference(theirs[c.Currency], c.Rate); diff != nil && diff.Cmp(tolerance) > 0 {
				disagreements = append(disagreements, fmt.Sprintf("%s says %s %s (published %s), %s from %s's %s (published %s)",
					names[i], c.Currency, theirs[c.Currency], q.Date, percent(diff), ours, c.Rate, chosen.Date))
			}
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
		return verdict{metav1.ConditionUnknown, operatorsv1.ReasonNotCompared,
			fmt.Sprintf("%s gave no fresh rate to compare with %s's", strings.Join(silent, " and "), ours)}
	}
	msg := fmt.Sprintf("%s agree with %s within %s", strings.Join(compared, " and "), ours, limit)
	if len(compared) == 1 {
		msg = fmt.Sprintf("%s agrees with %s within %s", compared[0], ours, limit)
	}
	if len(silent) > 0 {
		msg += fmt.Sprintf("; %s gave no fresh rate", strings.Join(silent, " and "))
	}
	return verdict{metav1.ConditionFalse, operatorsv1.ReasonSourcesAgree, msg}
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

// toleranceOf is spec.divergenceTolerance as a fraction, defaultTolerance when unset.
func toleranceOf(spec operatorsv1.ExchangeRateSpec) *big.Rat {
	v, ok := strings.CutSuffix(spec.DivergenceTolerance, "%")
	r, parsed := new(big.Rat).SetString(v)
	if !ok || !parsed || r.Sign() < 0 {
		return defaultTolerance
	}
	return r.Quo(r, big.NewRat(100, 1))
}

// controlledBy reports whether obj's controller reference is xr, by UID.
func controlledBy(obj metav1.Object, xr *operatorsv1.ExchangeRate) bool {
	ref := metav1.GetControllerOf(obj)
	return ref != nil && ref.UID == xr.UID
}

// configMapUpToDate reports whether existing is desired in all we own: label, data, owner.
func configMapUpToDate(existing, desired *corev1.ConfigMap, xr *operatorsv1.ExchangeRate) bool {
	return existing.Labels[managedByLabel] == managedByValue && controlledBy(existing, xr) &&
		maps.Equal(existing.Data, desired.Data) && len(existing.BinaryData) == 0
}

// routineUpdate reports whether an update only brings a new publication of what status says.
func routineUpdate(existing, desired *corev1.ConfigMap, xr *operatorsv1.ExchangeRate) bool {
	d, st := existing.Data, xr.Status
	if xr.Generation != st.ObservedGeneration || d[KeyDate] != st.PublicationDate || len(d) != len(desired.Data) ||
		d[KeyBase] != desired.Data[KeyBase] || d[KeySource] != desired.Data[KeySource] {
		return false
	}
	if len(xr.Spec.Currencies) == 0 {
		return st.Rate != "" && d[KeyRate] == st.Rate && d[KeyCurrency] == desired.Data[KeyCurrency]
	}
	return len(st.Rates) == len(xr.Spec.Currencies) && !slices.ContainsFunc(st.Rates, func(r operatorsv1.CurrencyRate) bool {
		_, wanted := desired.Data[r.Currency]
		return !wanted || d[r.Currency] != r.Rate
	})
}

// heldQuote returns the ConfigMap's quote when q is an older publication of its source: the
// RateCache's guard re-derived after a restart. Only from our own last write (a hand edit
// is put back) of exactly what desiredConfigMap makes of such a quote.
func heldQuote(existing *corev1.ConfigMap, xr *operatorsv1.ExchangeRate, q *Quote) *Quote {
	d := existing.Data
	if !controlledBy(existing, xr) || !lastWriteOurs(existing) || len(existing.BinaryData) != 0 ||
		d[KeySource] != q.Source || d[KeyBase] != q.Base || d[KeyDate] <= q.Date {
		return nil
	}
	held := &Quote{Base: q.Base, Date: d[KeyDate], Source: q.Source, Currency: q.Currency, Rate: d[KeyRate]}
	if q.Rates != nil {
		held.Rate, held.Rates = "", make([]operatorsv1.CurrencyRate, len(q.Rates))
		for i, r := range q.Rates {
			held.Rates[i] = operatorsv1.CurrencyRate{Currency: r.Currency, Rate: d[r.Currency]}
		}
	}
	if slices.ContainsFunc(held.list(), func(r operatorsv1.CurrencyRate) bool { return r.Rate == "" }) ||
		!maps.Equal(desiredConfigMap(xr, *held).Data, d) {
		return nil
	}
	return held
}

// lastWriteOurs reports whether obj's newest managedFields entry is ours (not on a tie).
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
