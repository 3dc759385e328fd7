package exchangerate

import (
	"errors"
	"math/big"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	operatorsv1 "github.com/quartet-operator/quartet/api/operators/v1"
)

func TestNextRefresh(t *testing.T) {
	zero := func() float64 { return 0 }
	half := func() float64 { return 0.5 }
	threeQuarters := func() float64 { return 0.75 }
	tab := &Table{Source: "ecb"}
	fetchErr := &FetchError{Reason: operatorsv1.ReasonUpstreamServerError, Err: errors.New("503")}
	tests := []struct {
		name     string
		o        outcome
		interval time.Duration
		random   func() float64
		want     time.Duration
	}{
		{name: "fresh table: when it turns older than the interval",
			o:        outcome{Now: t0.Add(10 * time.Minute), Sources: ecbOnly(Snapshot{Table: tab, CheckedAt: t0})},
			interval: time.Hour, random: zero, want: 50 * time.Minute},
		{name: "jitter is up to a tenth of the interval",
			o:        outcome{Now: t0.Add(10 * time.Minute), Sources: ecbOnly(Snapshot{Table: tab, CheckedAt: t0})},
			interval: time.Hour, random: half, want: 53 * time.Minute},
		{name: "jitter spreads over the whole tenth",
			o:        outcome{Now: t0, Sources: ecbOnly(Snapshot{Table: tab, CheckedAt: t0})},
			interval: time.Hour, random: threeQuarters, want: 64*time.Minute + 30*time.Second},
		{name: "after a failure: at the retry time",
			o:        outcome{Now: t0, Sources: ecbOnly(Snapshot{Table: tab, CheckedAt: t0.Add(-2 * time.Hour), Err: fetchErr, RetryAt: t0.Add(2 * time.Minute)})},
			interval: time.Hour, random: zero, want: 2 * time.Minute},
		{name: "after a failure: jitter a tenth of the backoff",
			o:        outcome{Now: t0, Sources: ecbOnly(Snapshot{Err: fetchErr, RetryAt: t0.Add(2 * time.Minute)})},
			interval: time.Hour, random: half, want: 2*time.Minute + 6*time.Second},
		{name: "unknown currency: wait for the spec to change",
			o:        outcome{Now: t0, Sources: ecbOnly(Snapshot{Table: tab, CheckedAt: t0}), QuoteErr: &UnknownCurrencyError{Code: "XYZ"}},
			interval: time.Hour, random: half, want: 0},
		{name: "unknown currency during an outage: still no requeue",
			o:        outcome{Now: t0, Sources: ecbOnly(Snapshot{Table: tab, Err: fetchErr, RetryAt: t0.Add(time.Minute)}), QuoteErr: &UnknownCurrencyError{Code: "XYZ"}},
			interval: time.Hour, random: half, want: 0},
		{name: "overdue check: never a hot loop",
			o:        outcome{Now: t0.Add(3 * time.Hour), Sources: ecbOnly(Snapshot{Table: tab, CheckedAt: t0})},
			interval: time.Hour, random: zero, want: time.Second},
		{name: "retry already due: never a hot loop",
			o:        outcome{Now: t0, Sources: ecbOnly(Snapshot{Err: fetchErr, RetryAt: t0.Add(-time.Minute)})},
			interval: time.Hour, random: half, want: time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, nextRefresh(tt.o, tt.interval, tt.random))
		})
	}
}

// TestNextRefreshOfSeveralSources: the earliest of the sources' moments, a publication
// included, with the jitter capped so the refresh after a publication comes soon.
func TestNextRefreshOfSeveralSources(t *testing.T) {
	zero := func() float64 { return 0 }
	almostOne := func() float64 { return 0.999999 }
	friday := utc(2026, 5, 15, 10, 0) // 14:10 UTC is the ECB's due time
	ecb := sourceAnswer{Name: "ecb", Schedule: ecbSchedule(), Snapshot: Snapshot{Table: &Table{Date: "2026-05-14"}, CheckedAt: friday}}
	blend := sourceAnswer{Name: "frankfurter-v2", Snapshot: Snapshot{Table: &Table{Date: "2026-05-15"}, CheckedAt: friday}}
	failing := sourceAnswer{Name: "frankfurter-v2", Snapshot: Snapshot{Table: &Table{Date: "2026-05-15"}, CheckedAt: friday.Add(-time.Hour),
		Err: &FetchError{Reason: operatorsv1.ReasonUpstreamTimeout, Err: errors.New("slow")}, RetryAt: friday.Add(2 * time.Minute)}}
	tests := []struct {
		name     string
		o        outcome
		interval time.Duration
		random   func() float64
		want     time.Duration
	}{
		{"the ECB's publication comes first", outcome{Now: friday, Sources: []sourceAnswer{ecb, blend}}, 6 * time.Hour, zero, 4*time.Hour + 10*time.Minute},
		{"the jitter after a publication is at most ten minutes", outcome{Now: friday, Sources: []sourceAnswer{ecb, blend}}, 6 * time.Hour, almostOne,
			4*time.Hour + 20*time.Minute},
		{"the other source's interval comes first", outcome{Now: friday, Sources: []sourceAnswer{ecb, blend}}, time.Hour, zero, time.Hour},
		{"a retry of the other source comes first", outcome{Now: friday, Sources: []sourceAnswer{ecb, failing}}, 6 * time.Hour, zero, 2 * time.Minute},
		{"a source beyond the manager's limit waits for the spec", outcome{Now: friday, SourcesErr: &SourceLimitError{Source: "x", Max: 1}},
			6 * time.Hour, zero, 0},
		{"no source pricing the spec waits for the spec", outcome{Now: friday, Sources: []sourceAnswer{ecb, blend},
			QuoteErr: unpricedError{{Code: "XBT"}, {Code: "XBT"}}}, 6 * time.Hour, zero, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.InDelta(t, tt.want, nextRefresh(tt.o, tt.interval, tt.random), float64(time.Millisecond))
		})
	}
}

// TestPriceSpec: which source's rate is written.
func TestPriceSpec(t *testing.T) {
	now := utc(2026, 5, 15, 18, 0)
	ecbTab := mustTable(t, "ecb", "2026-05-15", map[string]string{"USD": "1.1625"})
	oldTab := mustTable(t, "ecb", "2026-05-08", map[string]string{"USD": "1.15"})
	v2Tab := mustTable(t, "frankfurter-v2", "2026-05-15", map[string]string{"USD": "1.163", "ARS": "1389.6"})
	outage := &FetchError{Reason: operatorsv1.ReasonUpstreamServerError, Err: errors.New("503")}
	ok := func(name string, tab *Table) sourceAnswer {
		return sourceAnswer{Name: name, Snapshot: Snapshot{Table: tab}}
	}
	failed := func(name string, tab *Table) sourceAnswer {
		return sourceAnswer{Name: name, Snapshot: Snapshot{Table: tab, Err: outage}}
	}
	usd := operatorsv1.ExchangeRateSpec{Currency: "USD"}
	tests := []struct {
		name       string
		answers    []sourceAnswer
		spec       operatorsv1.ExchangeRateSpec
		wantSource string // "" for none
		wantFresh  []bool
		wantErr    string
	}{
		{"the first source when it is fresh", []sourceAnswer{ok("ecb", ecbTab), ok("frankfurter-v2", v2Tab)}, usd, "ecb", []bool{true, true}, ""},
		{"failover: the first failed", []sourceAnswer{failed("ecb", ecbTab), ok("frankfurter-v2", v2Tab)}, usd, "frankfurter-v2", []bool{false, true}, ""},
		{"failover: the first is older than the stale limit", []sourceAnswer{ok("ecb", oldTab), ok("frankfurter-v2", v2Tab)}, usd,
			"frankfurter-v2", []bool{false, true}, ""},
		{"the first that prices the spec", []sourceAnswer{ok("ecb", ecbTab), ok("frankfurter-v2", v2Tab)},
			operatorsv1.ExchangeRateSpec{Currency: "ARS"}, "frankfurter-v2", []bool{false, true}, ""},
		{"all failing: the most recent publication", []sourceAnswer{failed("ecb", oldTab), failed("frankfurter-v2", v2Tab)}, usd,
			"frankfurter-v2", []bool{false, false}, ""},
		{"all failing with the same date: the first", []sourceAnswer{failed("ecb", ecbTab), failed("frankfurter-v2", v2Tab)}, usd,
			"ecb", []bool{false, false}, ""},
		{"no table yet anywhere", []sourceAnswer{failed("ecb", nil), ok("frankfurter-v2", nil)}, usd, "", []bool{false, false}, ""},
		{"unknown to one, the other has no table yet: no verdict", []sourceAnswer{ok("ecb", ecbTab), failed("frankfurter-v2", nil)},
			operatorsv1.ExchangeRateSpec{Currency: "ARS"}, "", []bool{false, false}, ""},
		{"unknown to every source", []sourceAnswer{ok("ecb", ecbTab), ok("frankfurter-v2", v2Tab)},
			operatorsv1.ExchangeRateSpec{Currency: "XBT"}, "", []bool{false, false},
			"no source publishes a rate for XBT: ecb does not publish a rate for XBT (it publishes EUR, USD); frankfurter-v2 does not publish"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := priceSpec(tt.answers, tt.spec, now, 5)
			assert.Equal(t, tt.wantFresh, p.Fresh)
			if tt.wantSource == "" {
				assert.Equal(t, -1, p.Chosen)
			} else {
				require.GreaterOrEqual(t, p.Chosen, 0)
				assert.Equal(t, tt.wantSource, p.Quotes[p.Chosen].Source)
			}
			if tt.wantErr == "" {
				assert.NoError(t, p.Err)
			} else {
				require.ErrorContains(t, p.Err, tt.wantErr)
				var unknown *UnknownCurrencyError
				assert.ErrorAs(t, p.Err, &unknown, "nextRefresh and computeStatus find the spec mistake")
			}
		})
	}
}

// TestCrossCheck: the Divergent condition's content.
func TestCrossCheck(t *testing.T) {
	q := func(source, date string, rates ...string) *Quote {
		quote := &Quote{Base: "EUR", Date: date, Source: source}
		if len(rates) == 2 {
			quote.Currency, quote.Rate = rates[0], rates[1]
			return quote
		}
		for i := 0; i < len(rates); i += 2 {
			quote.Rates = append(quote.Rates, operatorsv1.CurrencyRate{Currency: rates[i], Rate: rates[i+1]})
		}
		return quote
	}
	two := []string{"ecb", "frankfurter-v2"}
	onePercent := big.NewRat(1, 100)
	tests := []struct {
		name      string
		names     []string
		p         pricing
		tolerance *big.Rat
		want      verdict
	}{
		{"one source", []string{"ecb"}, pricing{Quotes: []*Quote{q("ecb", "2026-05-15", "USD", "1.1625")}, Fresh: []bool{true}}, onePercent,
			verdict{metav1.ConditionFalse, operatorsv1.ReasonSingleSource, "one source (ecb): nothing to cross-check"}},
		{"no rate yet", two, pricing{Quotes: []*Quote{nil, nil}, Fresh: []bool{false, false}, Chosen: -1}, onePercent,
			verdict{metav1.ConditionUnknown, operatorsv1.ReasonNotCompared, "no rate yet"}},
		{"agree within the tolerance (0.04 %)", two, pricing{Quotes: []*Quote{q("ecb", "2026-05-15", "USD", "1.1625"),
			q("frankfurter-v2", "2026-05-15", "USD", "1.163")}, Fresh: []bool{true, true}}, onePercent,
			verdict{metav1.ConditionFalse, operatorsv1.ReasonSourcesAgree, "frankfurter-v2 agrees with ecb within 1%"}},
		{"disagree beyond it", two, pricing{Quotes: []*Quote{q("ecb", "2026-05-15", "USD", "1.1625"),
			q("frankfurter-v2", "2026-05-15", "USD", "1.25")}, Fresh: []bool{true, true}}, onePercent,
			verdict{metav1.ConditionTrue, operatorsv1.ReasonSourcesDisagree,
				"frankfurter-v2 says USD 1.25 (published 2026-05-15), 7.53% from ecb's 1.1625 (published 2026-05-15); the tolerance is 1%"}},
		{"exactly at the tolerance agrees", two, pricing{Quotes: []*Quote{q("ecb", "2026-05-15", "USD", "1"),
			q("frankfurter-v2", "2026-05-15", "USD", "0.995")}, Fresh: []bool{true, true}}, big.NewRat(5, 1000),
			verdict{metav1.ConditionFalse, operatorsv1.ReasonSourcesAgree, "frankfurter-v2 agrees with ecb within 0.5%"}},
		{"a zero tolerance: any difference", two, pricing{Quotes: []*Quote{q("ecb", "2026-05-15", "USD", "1.1625"),
			q("frankfurter-v2", "2026-05-15", "USD", "1.1626")}, Fresh: []bool{true, true}}, new(big.Rat),
			verdict{metav1.ConditionTrue, operatorsv1.ReasonSourcesDisagree,
				"frankfurter-v2 says USD 1.1626 (published 2026-05-15), 0.0086% from ecb's 1.1625 (published 2026-05-15); the tolerance is 0%"}},
		{"after a failover the written rate is the second source's", two, pricing{Quotes: []*Quote{q("ecb", "2026-05-14", "USD", "1.1625"),
			q("frankfurter-v2", "2026-05-15", "USD", "1.17")}, Fresh: []bool{false, true}, Chosen: 1}, onePercent,
			verdict{metav1.ConditionUnknown, operatorsv1.ReasonNotCompared, "ecb gave no fresh rate to compare with frankfurter-v2's"}},
		{"nothing fresh", two, pricing{Quotes: []*Quote{q("ecb", "2026-05-04", "USD", "1.1625"), nil}, Fresh: []bool{false, false}}, onePercent,
			verdict{metav1.ConditionUnknown, operatorsv1.ReasonNotCompared, "no source gave a fresh rate to compare"}},
		{"several currencies, one off", two, pricing{Quotes: []*Quote{q("ecb", "2026-05-15", "USD", "1.1625", "GBP", "0.86485"),
			q("frankfurter-v2", "2026-05-15", "USD", "1.1625", "GBP", "0.5")}, Fresh: []bool{true, true}}, onePercent,
			verdict{metav1.ConditionTrue, operatorsv1.ReasonSourcesDisagree,
				"frankfurter-v2 says GBP 0.5 (published 2026-05-15), 42.2% from ecb's 0.86485 (published 2026-05-15); the tolerance is 1%"}},
		{"three sources, one silent", []string{"ecb", "frankfurter", "frankfurter-v2"}, pricing{Quotes: []*Quote{q("ecb", "2026-05-15", "USD", "1.1625"),
			q("frankfurter", "2026-05-15", "USD", "1.1625"), nil}, Fresh: []bool{true, true, false}}, onePercent,
			verdict{metav1.ConditionFalse, operatorsv1.ReasonSourcesAgree, "frankfurter agrees with ecb within 1%; frankfurter-v2 gave no fresh rate"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, crossCheck(tt.names, tt.p, tt.tolerance))
		})
	}

	t.Log("a disagreement on many currencies lists five")
	var ours, theirs []string
	for _, c := range []string{"AUD", "CAD", "CHF", "GBP", "JPY", "NOK", "USD"} {
		ours, theirs = append(ours, c, "1"), append(theirs, c, "2")
	}
	v := crossCheck(two, pricing{Quotes: []*Quote{q("ecb", "2026-05-15", ours...), q("frankfurter-v2", "2026-05-15", theirs...)},
		Fresh: []bool{true, true}}, onePercent)
	assert.Equal(t, metav1.ConditionTrue, v.Status)
	assert.Contains(t, v.Message, "says JPY 2 (published 2026-05-15), 100% from ecb's 1 (published 2026-05-15) and 2 more; the tolerance is 1%")
	assert.NotContains(t, v.Message, "NOK")
}

func TestToleranceOf(t *testing.T) {
	for in, want := range map[string]*big.Rat{
		"": big.NewRat(1, 100), "1%": big.NewRat(1, 100), "0.5%": big.NewRat(1, 200), "0%": new(big.Rat), "100%": big.NewRat(1, 1),
		"12.125%": big.NewRat(97, 800), "5": big.NewRat(1, 100), "x%": big.NewRat(1, 100),
	} {
		assert.Zero(t, want.Cmp(toleranceOf(operatorsv1.ExchangeRateSpec{DivergenceTolerance: in})), "%q", in)
	}
}

func TestRefreshInterval(t *testing.T) {
	assert.Equal(t, time.Hour, refreshInterval(operatorsv1.ExchangeRateSpec{}, time.Hour))
	assert.Equal(t, 5*time.Minute, refreshInterval(operatorsv1.ExchangeRateSpec{RefreshInterval: &metav1.Duration{Duration: 5 * time.Minute}}, time.Hour))
	assert.Equal(t, time.Hour, refreshInterval(operatorsv1.ExchangeRateSpec{RefreshInterval: &metav1.Duration{}}, time.Hour))
}

func TestConfigMapUpToDate(t *testing.T) {
	xr := testXR("USD", "EUR")
	desired := desiredConfigMap(xr, Quote{Base: "EUR", Currency: "USD", Rate: "1.1625", Date: "2026-05-15", Source: "ecb"})
	mutate := func(f func(cm *corev1.ConfigMap)) *corev1.ConfigMap {
		cm := desired.DeepCopy()
		cm.ResourceVersion = "42"
		f(cm)
		return cm
	}
	other := testXR("USD", "EUR")
	other.UID = "uid-old"
	tests := []struct {
		name     string
		existing *corev1.ConfigMap
		want     bool
	}{
		{name: "same", existing: mutate(func(*corev1.ConfigMap) {}), want: true},
		{name: "extra label is fine", existing: mutate(func(cm *corev1.ConfigMap) { cm.Labels["team"] = "a" }), want: true},
		{name: "rate changed", existing: mutate(func(cm *corev1.ConfigMap) { cm.Data["rate"] = "1.2" }), want: false},
		{name: "key added by hand", existing: mutate(func(cm *corev1.ConfigMap) { cm.Data["note"] = "x" }), want: false},
		{name: "binary data added", existing: mutate(func(cm *corev1.ConfigMap) { cm.BinaryData = map[string][]byte{"b": {1}} }), want: false},
		{name: "label missing", existing: mutate(func(cm *corev1.ConfigMap) { cm.Labels = nil }), want: false},
		{name: "owned by an older ExchangeRate of that name", existing: mutate(func(cm *corev1.ConfigMap) {
			cm.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(other, operatorsv1.GroupVersion.WithKind("ExchangeRate"))}
		}), want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, configMapUpToDate(tt.existing, desired, xr))
		})
	}
}

func TestRoutineUpdate(t *testing.T) {
	// The last pass wrote 1.1625 published 2026-05-15 and recorded it in status.
	written := func() *corev1.ConfigMap {
		xr := testXR("USD", "EUR")
		return desiredConfigMap(xr, Quote{Base: "EUR", Currency: "USD", Rate: "1.1625", Date: "2026-05-15", Source: "ecb"})
	}
	settled := func() *operatorsv1.ExchangeRate {
		xr := testXR("USD", "EUR")
		xr.Generation, xr.Status.ObservedGeneration = 3, 3
		xr.Status.Rate, xr.Status.PublicationDate = "1.1625", "2026-05-15"
		return xr
	}
	next := Quote{Base: "EUR", Currency: "USD", Rate: "1.1702", Date: "2026-05-18", Source: "ecb"}
	tests := []struct {
		name     string
		xr       func(*operatorsv1.ExchangeRate)
		existing func(*corev1.ConfigMap)
		quote    func(*Quote)
		want     bool
	}{
		{name: "a new publication", want: true},
		{name: "a corrected rate, same publication date", quote: func(q *Quote) { q.Date = "2026-05-15" }, want: true},
		{name: "spec changed since the last pass", xr: func(xr *operatorsv1.ExchangeRate) { xr.Generation = 4 }, quote: func(q *Quote) { q.Currency = "JPY" }},
		{name: "rate edited by someone else", existing: func(cm *corev1.ConfigMap) { cm.Data[KeyRate] = "42" }},
		{name: "date edited by someone else", existing: func(cm *corev1.ConfigMap) { cm.Data[KeyDate] = "2020-01-01" }},
		{name: "key added by someone else", existing: func(cm *corev1.ConfigMap) { cm.Data["note"] = "x" }},
		{name: "key removed by someone else", existing: func(cm *corev1.ConfigMap) { delete(cm.Data, KeySource) }},
		{name: "source changed (another manager flag)", quote: func(q *Quote) { q.Source = "frankfurter" }},
		{name: "no rate in status yet", xr: func(xr *operatorsv1.ExchangeRate) { xr.Status.Rate, xr.Status.PublicationDate = "", "" },
			existing: func(cm *corev1.ConfigMap) { cm.Data[KeyRate], cm.Data[KeyDate] = "", "" }},
		{name: "failover to another source", quote: func(q *Quote) { q.Source = "frankfurter-v2" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			xr, existing, q := settled(), written(), next
			if tt.xr != nil {
				tt.xr(xr)
			}
			if tt.existing != nil {
				tt.existing(existing)
			}
			if tt.quote != nil {
				tt.quote(&q)
			}
			assert.Equal(t, tt.want, routineUpdate(existing, desiredConfigMap(xr, q), xr))
		})
	}
}

// TestRoutineUpdateOfSeveralCurrencies: the same, for spec.currencies.
func TestRoutineUpdateOfSeveralCurrencies(t *testing.T) {
	rates := func(usd, gbp string) []operatorsv1.CurrencyRate {
		return []operatorsv1.CurrencyRate{{Currency: "USD", Rate: usd}, {Currency: "GBP", Rate: gbp}}
	}
	settled := func() *operatorsv1.ExchangeRate {
		xr := testXR("", "EUR")
		xr.Spec.Currencies = []string{"USD", "GBP"}
		xr.Generation, xr.Status.ObservedGeneration = 3, 3
		xr.Status.Rates, xr.Status.PublicationDate = rates("1.1625", "0.86485"), "2026-05-15"
		return xr
	}
	written := func() *corev1.ConfigMap {
		return desiredConfigMap(settled(), Quote{Base: "EUR", Date: "2026-05-15", Source: "ecb", Rates: rates("1.1625", "0.86485")})
	}
	next := Quote{Base: "EUR", Date: "2026-05-18", Source: "ecb", Rates: rates("1.1702", "0.8701")}
	tests := []struct {
		name     string
		xr       func(*operatorsv1.ExchangeRate)
		existing func(*corev1.ConfigMap)
		want     bool
	}{
		{name: "a new publication", want: true},
		{name: "a rate edited by someone else", existing: func(cm *corev1.ConfigMap) { cm.Data["GBP"] = "42" }},
		{name: "a currency key removed by someone else", existing: func(cm *corev1.ConfigMap) { delete(cm.Data, "GBP"); cm.Data["note"] = "x" }},
		{name: "a currency added to the spec", xr: func(xr *operatorsv1.ExchangeRate) {
			xr.Spec.Currencies = append(xr.Spec.Currencies, "JPY")
		}},
		{name: "no rates in status yet", xr: func(xr *operatorsv1.ExchangeRate) { xr.Status.Rates = nil }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			xr, existing := settled(), written()
			if tt.xr != nil {
				tt.xr(xr)
			}
			if tt.existing != nil {
				tt.existing(existing)
			}
			assert.Equal(t, tt.want, routineUpdate(existing, desiredConfigMap(xr, next), xr))
		})
	}
}

func TestHeldQuote(t *testing.T) {
	ours := []metav1.ManagedFieldsEntry{{Manager: FieldOwner, Operation: metav1.ManagedFieldsOperationUpdate, Time: &metav1.Time{Time: t0}}}
	// The ConfigMap as the last pass wrote it: 1.1702 published 2026-05-18 by the ECB.
	written := func(xr *operatorsv1.ExchangeRate, q Quote) *corev1.ConfigMap {
		cm := desiredConfigMap(xr, q)
		cm.ManagedFields = ours
		return cm
	}
	single := Quote{Base: "EUR", Currency: "USD", Rate: "1.1702", Date: "2026-05-18", Source: "ecb"}
	older := Quote{Base: "EUR", Currency: "USD", Rate: "1.1625", Date: "2026-05-15", Source: "ecb"}
	rates := func(usd, gbp string) []operatorsv1.CurrencyRate {
		return []operatorsv1.CurrencyRate{{Currency: "USD", Rate: usd}, {Currency: "GBP", Rate: gbp}}
	}
	several := Quote{Base: "EUR", Date: "2026-05-18", Source: "ecb", Rates: rates("1.1702", "0.8701")}
	severalOlder := Quote{Base: "EUR", Date: "2026-05-15", Source: "ecb", Rates: rates("1.1625", "0.86485")}
	multi := testXR("", "EUR")
	multi.Spec.Currencies = []string{"USD", "GBP"}
	other := testXR("USD", "EUR")
	other.UID = "uid-old"
	tests := []struct {
		name     string
		xr       *operatorsv1.ExchangeRate
		existing Quote
		edit     func(*corev1.ConfigMap)
		answer   Quote
		want     *Quote // nil: write the answer
	}{
		{name: "an older publication of the same source is held back", existing: single, answer: older, want: &single},
		{name: "several currencies: held back in the spec's order", xr: multi, existing: several, answer: severalOlder, want: &several},
		{name: "the same publication is written (a correction)", existing: single,
			answer: Quote{Base: "EUR", Currency: "USD", Rate: "1.1703", Date: "2026-05-18", Source: "ecb"}},
		{name: "a newer publication is written", existing: older, answer: single},
		{name: "another source's older publication is written (failover)", existing: single,
			answer: Quote{Base: "EUR", Currency: "USD", Rate: "1.1625", Date: "2026-05-15", Source: "frankfurter"}},
		{name: "another base is written (spec change)", existing: single,
			answer: Quote{Base: "USD", Currency: "USD", Rate: "1", Date: "2026-05-15", Source: "ecb"}},
		{name: "another currency is written (spec change)", existing: single,
			answer: Quote{Base: "EUR", Currency: "JPY", Rate: "171.58", Date: "2026-05-15", Source: "ecb"}},
		{name: "a currency added to the spec is written", xr: multi, existing: several,
			answer: Quote{Base: "EUR", Date: "2026-05-15", Source: "ecb", Rates: append(rates("1.1625", "0.86485"), operatorsv1.CurrencyRate{Currency: "JPY", Rate: "171.58"})}},
		{name: "a date edited by hand is put back", existing: single, answer: older, edit: func(cm *corev1.ConfigMap) {
			cm.ManagedFields = append(cm.ManagedFields, metav1.ManagedFieldsEntry{Manager: "kubectl-edit", Time: &metav1.Time{Time: t0.Add(time.Second)}})
		}},
		{name: "a key added is put back", existing: single, answer: older, edit: func(cm *corev1.ConfigMap) { cm.Data["note"] = "x" }},
		{name: "binary data is put back", existing: single, answer: older, edit: func(cm *corev1.ConfigMap) { cm.BinaryData = map[string][]byte{"b": {1}} }},
		{name: "an empty rate is not held", existing: single, answer: older, edit: func(cm *corev1.ConfigMap) { cm.Data[KeyRate] = "" }},
		{name: "a ConfigMap of an older ExchangeRate of the name is not held", existing: single, answer: older, edit: func(cm *corev1.ConfigMap) {
			cm.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(other, operatorsv1.GroupVersion.WithKind("ExchangeRate"))}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			xr := tt.xr
			if xr == nil {
				xr = testXR("USD", "EUR")
			}
			existing := written(xr, tt.existing)
			if tt.edit != nil {
				tt.edit(existing)
			}
			answer := tt.answer
			assert.Equal(t, tt.want, heldQuote(existing, xr, &answer))
		})
	}
}

func TestControlledBy(t *testing.T) {
	xr := testXR("USD", "EUR")
	cm := &corev1.ConfigMap{}
	assert.False(t, controlledBy(cm, xr), "no owner")
	cm.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ExchangeRate", Name: xr.Name, UID: xr.UID}}
	assert.False(t, controlledBy(cm, xr), "owner but not controller")
	cm.OwnerReferences[0].Controller = ptr.To(true)
	assert.True(t, controlledBy(cm, xr))
}

func TestLastWriteOurs(t *testing.T) {
	at := func(sec int) *metav1.Time { tm := metav1.NewTime(t0.Add(time.Duration(sec) * time.Second)); return &tm }
	entry := func(manager string, sec int) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, Time: at(sec)}
	}
	tests := []struct {
		name    string
		entries []metav1.ManagedFieldsEntry
		want    bool
	}{
		{"no managed fields", nil, false},
		{"only ours", []metav1.ManagedFieldsEntry{entry("quartet-exchangerate", 1)}, true},
		{"ours newest", []metav1.ManagedFieldsEntry{entry("kubectl-edit", 1), entry("quartet-exchangerate", 2)}, true},
		{"someone else newest", []metav1.ManagedFieldsEntry{entry("quartet-exchangerate", 2), entry("kubectl-edit", 3)}, false},
		{"tie counts as an edit", []metav1.ManagedFieldsEntry{entry("quartet-exchangerate", 2), entry("kubectl-edit", 2)}, false},
		{"tie the other way round", []metav1.ManagedFieldsEntry{entry("kubectl-edit", 2), entry("quartet-exchangerate", 2)}, false},
		{"entry without time ignored", []metav1.ManagedFieldsEntry{entry("quartet-exchangerate", 2), {Manager: "x"}}, true},
	}
	for _, tt := range tests {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{ManagedFields: tt.entries}}
		assert.Equal(t, tt.want, lastWriteOurs(cm), tt.name)
	}
}
