package exchangerate

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	operatorsv1 "github.com/quartet-operator/quartet/api/operators/v1"
	"github.com/quartet-operator/quartet/test/testenv"
)

// cond is a condition's status and reason, what the tables compare.
type cond struct {
	Status metav1.ConditionStatus
	Reason string
}

func conds(st operatorsv1.ExchangeRateStatus) map[string]cond {
	out := map[string]cond{}
	for _, c := range st.Conditions {
		out[c.Type] = cond{c.Status, c.Reason}
	}
	return out
}

func TestComputeStatus(t *testing.T) {
	now := t0.Add(500 * time.Millisecond) // sub-second part must not reach the status
	tab := mustTable(t, "ecb", "2026-05-15", map[string]string{"USD": "1.1625"})
	usd := &Quote{Base: "EUR", Currency: "USD", Rate: "1.1625", Date: "2026-05-15", Source: "ecb"}
	yesterday := metav1.NewTime(t0.Add(-24 * time.Hour))
	goodPrev := operatorsv1.ExchangeRateStatus{
		ObservedGeneration: 2, Rate: "1.1", PublicationDate: "2026-05-14", Source: "ecb", ConfigMapName: "exchange-rate-usd",
		LastSuccessfulFetch: &yesterday,
		Conditions: []metav1.Condition{
			{Type: operatorsv1.ConditionReady, Status: metav1.ConditionTrue, Reason: operatorsv1.ReasonRateWritten, LastTransitionTime: metav1.NewTime(t0.Add(-24 * time.Hour))},
			{Type: operatorsv1.ConditionDegraded, Status: metav1.ConditionFalse, Reason: operatorsv1.ReasonFetchSucceeded, LastTransitionTime: metav1.NewTime(t0.Add(-24 * time.Hour))},
			{Type: operatorsv1.ConditionStale, Status: metav1.ConditionFalse, Reason: operatorsv1.ReasonPublicationCurrent, LastTransitionTime: metav1.NewTime(t0.Add(-24 * time.Hour))},
		},
	}
	outage := &FetchError{Reason: operatorsv1.ReasonUpstreamServerError, Err: errors.New("https://ecb answered 503 Service Unavailable")}

	tests := []struct {
		name        string
		prev        operatorsv1.ExchangeRateStatus
		o           outcome
		wantConds   map[string]cond
		wantRate    string
		wantDate    string
		wantObsGen  int64
		wantFetched *time.Time
		wantMsg     map[string]string // substrings of condition messages
	}{
		{
			name: "first rate written",
			o: outcome{Now: now, Generation: 3, Sources: ecbOnly(Snapshot{Table: tab, CheckedAt: now, FetchedAt: now}), Quote: usd,
				ConfigMapName: "exchange-rate-usd", StaleAfterDays: 5},
			wantConds: map[string]cond{
				operatorsv1.ConditionReady:     {metav1.ConditionTrue, operatorsv1.ReasonRateWritten},
				operatorsv1.ConditionDegraded:  {metav1.ConditionFalse, operatorsv1.ReasonFetchSucceeded},
				operatorsv1.ConditionStale:     {metav1.ConditionFalse, operatorsv1.ReasonPublicationCurrent},
				operatorsv1.ConditionDivergent: {metav1.ConditionFalse, operatorsv1.ReasonSingleSource},
			},
			wantRate: "1.1625", wantDate: "2026-05-15", wantObsGen: 3, wantFetched: &t0,
			wantMsg: map[string]string{operatorsv1.ConditionReady: "ConfigMap exchange-rate-usd holds 1.1625 USD per EUR, published 2026-05-15 by ecb"},
		},
		{
			name: "outage: last good table still prices, Degraded says why",
			prev: goodPrev,
			o: outcome{Now: now, Generation: 3, Sources: ecbOnly(Snapshot{Table: tab, CheckedAt: t0.Add(-time.Hour), FetchedAt: t0.Add(-2 * time.Hour),
				Err: outage, RetryAt: t0.Add(time.Minute)}),
				Quote: usd, ConfigMapName: "exchange-rate-usd", StaleAfterDays: 5},
			wantConds: map[string]cond{
				operatorsv1.ConditionReady:     {metav1.ConditionTrue, operatorsv1.ReasonRateWritten},
				operatorsv1.ConditionDegraded:  {metav1.ConditionTrue, operatorsv1.ReasonUpstreamServerError},
				operatorsv1.ConditionStale:     {metav1.ConditionFalse, operatorsv1.ReasonPublicationCurrent},
				operatorsv1.ConditionDivergent: {metav1.ConditionFalse, operatorsv1.ReasonSingleSource},
			},
			// The rate in status is new: it was brought by the fetch of its table, not by the last check.
			wantRate: "1.1625", wantDate: "2026-05-15", wantObsGen: 3, wantFetched: ptrTime(t0.Add(-2 * time.Hour)),
			wantMsg: map[string]string{operatorsv1.ConditionDegraded: "503 Service Unavailable; keeping rate 1.1625 published 2026-05-15; retrying with backoff"},
		},
		{
			name: "first fetch fails: no rate yet",
			o:    outcome{Now: now, Generation: 1, Sources: ecbOnly(Snapshot{Err: outage, RetryAt: t0.Add(time.Minute)}), ConfigMapName: "x", StaleAfterDays: 5},
			wantConds: map[string]cond{
				operatorsv1.ConditionReady:     {metav1.ConditionFalse, operatorsv1.ReasonRateUnavailable},
				operatorsv1.ConditionDegraded:  {metav1.ConditionTrue, operatorsv1.ReasonUpstreamServerError},
				operatorsv1.ConditionStale:     {metav1.ConditionUnknown, operatorsv1.ReasonNoPublication},
				operatorsv1.ConditionDivergent: {metav1.ConditionFalse, operatorsv1.ReasonSingleSource},
			},
			// The source is retried with backoff and nothing was written: the spec was not
			// acted on, so observedGeneration stays where it was.
			wantObsGen: 0,
			wantMsg:    map[string]string{operatorsv1.ConditionReady: "no rate yet: https://ecb answered 503", operatorsv1.ConditionDegraded: "no rate has been fetched yet"},
		},
		{
			name: "unknown currency keeps the last good rate",
			prev: goodPrev,
			o: outcome{Now: now, Generation: 4, Sources: ecbOnly(Snapshot{Table: tab, CheckedAt: now, FetchedAt: now}),
				QuoteErr: &UnknownCurrencyError{Code: "XYZ", Source: "ecb", Known: []string{"EUR", "USD"}}, ConfigMapName: "exchange-rate-usd", StaleAfterDays: 5},
			wantConds: map[string]cond{
				operatorsv1.ConditionReady:     {metav1.ConditionFalse, operatorsv1.ReasonUnknownCurrency},
				operatorsv1.ConditionDegraded:  {metav1.ConditionFalse, operatorsv1.ReasonFetchSucceeded},
				operatorsv1.ConditionStale:     {metav1.ConditionFalse, operatorsv1.ReasonPublicationCurrent},
				operatorsv1.ConditionDivergent: {metav1.ConditionFalse, operatorsv1.ReasonSingleSource},
			},
			// The kept rate keeps the time of the fetch that brought it.
			wantRate: "1.1", wantDate: "2026-05-14", wantObsGen: 4, wantFetched: ptrTime(yesterday.Time),
			wantMsg: map[string]string{operatorsv1.ConditionReady: "ecb does not publish a rate for XYZ (it publishes EUR, USD); waiting for the spec to change"},
		},
		{
			name: "someone else's ConfigMap",
			o: outcome{Now: now, Generation: 1, Sources: ecbOnly(Snapshot{Table: tab, CheckedAt: now, FetchedAt: now}), ConfigMapErr: errConfigMapConflict,
				ConfigMapName: "exchange-rate-usd", StaleAfterDays: 5},
			wantConds: map[string]cond{
				operatorsv1.ConditionReady:     {metav1.ConditionFalse, operatorsv1.ReasonConfigMapConflict},
				operatorsv1.ConditionDegraded:  {metav1.ConditionFalse, operatorsv1.ReasonFetchSucceeded},
				operatorsv1.ConditionStale:     {metav1.ConditionUnknown, operatorsv1.ReasonNoPublication},
				operatorsv1.ConditionDivergent: {metav1.ConditionFalse, operatorsv1.ReasonSingleSource},
			},
			// No rate in status, so no fetch brought one.
			wantObsGen: 1,
		},
		{
			name: "API error writing the ConfigMap: the generation is not observed, Ready says it failed",
			prev: goodPrev,
			o: outcome{Now: now, Generation: 3, Sources: ecbOnly(Snapshot{Table: tab, CheckedAt: now, FetchedAt: now}), ConfigMapErr: errors.New("etcd timeout"),
				ConfigMapName: "exchange-rate-usd", StaleAfterDays: 5},
			wantConds: map[string]cond{
				operatorsv1.ConditionReady:     {metav1.ConditionFalse, operatorsv1.ReasonConfigMapWriteFailed},
				operatorsv1.ConditionDegraded:  {metav1.ConditionFalse, operatorsv1.ReasonFetchSucceeded},
				operatorsv1.ConditionStale:     {metav1.ConditionFalse, operatorsv1.ReasonPublicationCurrent},
				operatorsv1.ConditionDivergent: {metav1.ConditionFalse, operatorsv1.ReasonSingleSource},
			},
			wantRate: "1.1", wantDate: "2026-05-14", wantObsGen: 2, wantFetched: ptrTime(yesterday.Time),
			wantMsg: map[string]string{operatorsv1.ConditionReady: "writing ConfigMap exchange-rate-usd: etcd timeout"},
		},
		{
			name: "publication older than the limit is Stale",
			o: outcome{Now: t0.AddDate(0, 0, 6), Generation: 1, Sources: ecbOnly(Snapshot{Table: tab, CheckedAt: t0.AddDate(0, 0, 6), FetchedAt: t0}), Quote: usd,
				ConfigMapName: "exchange-rate-usd", StaleAfterDays: 5},
			wantConds: map[string]cond{
				operatorsv1.ConditionReady:     {metav1.ConditionTrue, operatorsv1.ReasonRateWritten},
				operatorsv1.ConditionDegraded:  {metav1.ConditionFalse, operatorsv1.ReasonFetchSucceeded},
				operatorsv1.ConditionStale:     {metav1.ConditionTrue, operatorsv1.ReasonPublicationOld},
				operatorsv1.ConditionDivergent: {metav1.ConditionFalse, operatorsv1.ReasonSingleSource},
			},
			wantRate: "1.1625", wantDate: "2026-05-15", wantObsGen: 1, wantFetched: &t0,
			wantMsg: map[string]string{operatorsv1.ConditionStale: "the rate was published 2026-05-15, more than 5 days ago: Stale since 2026-05-21 (UTC)"},
		},
		{
			name: "publication exactly at the limit is not Stale",
			o: outcome{Now: t0.AddDate(0, 0, 5), Generation: 1, Sources: ecbOnly(Snapshot{Table: tab, CheckedAt: t0.AddDate(0, 0, 5), FetchedAt: t0}), Quote: usd,
				ConfigMapName: "exchange-rate-usd", StaleAfterDays: 5},
			wantConds: map[string]cond{
				operatorsv1.ConditionReady:     {metav1.ConditionTrue, operatorsv1.ReasonRateWritten},
				operatorsv1.ConditionDegraded:  {metav1.ConditionFalse, operatorsv1.ReasonFetchSucceeded},
				operatorsv1.ConditionStale:     {metav1.ConditionFalse, operatorsv1.ReasonPublicationCurrent},
				operatorsv1.ConditionDivergent: {metav1.ConditionFalse, operatorsv1.ReasonSingleSource},
			},
			wantRate: "1.1625", wantDate: "2026-05-15", wantObsGen: 1, wantFetched: &t0,
			wantMsg: map[string]string{operatorsv1.ConditionStale: "the rate was published 2026-05-15; the limit is 5 days: Stale from 2026-05-21 (UTC)"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prevCopy := tt.prev.DeepCopy()
			st := computeStatus(tt.prev, tt.o)
			assert.Equal(t, *prevCopy, tt.prev, "computeStatus must not modify its input")
			assert.Equal(t, tt.wantConds, conds(st))
			assert.Equal(t, tt.wantRate, st.Rate)
			assert.Equal(t, tt.wantDate, st.PublicationDate)
			assert.Equal(t, tt.wantObsGen, observedGeneration(tt.prev, tt.o))
			if tt.wantFetched == nil {
				assert.Nil(t, st.LastSuccessfulFetch)
			} else {
				require.NotNil(t, st.LastSuccessfulFetch)
				assert.Equal(t, tt.wantFetched.Truncate(time.Second), st.LastSuccessfulFetch.Time)
			}
			for typ, sub := range tt.wantMsg {
				assert.Contains(t, testenv.Condition(st.Conditions, typ).Message, sub)
			}
			for _, c := range st.Conditions {
				assert.Equal(t, tt.o.Generation, c.ObservedGeneration)
				assert.Zero(t, c.LastTransitionTime.Nanosecond(), "transition times are whole seconds, as the API stores them")
			}
		})
	}
}

func ptrTime(t time.Time) *time.Time { return &t }

// observedGeneration is the status.observedGeneration Writer.Finish leaves after a pass
// with outcome o that returned no error, from prev's: Reconcile's acted is
// reterr == nil && o.actedOn().
func observedGeneration(prev operatorsv1.ExchangeRateStatus, o outcome) int64 {
	if o.actedOn() {
		return o.Generation
	}
	return prev.ObservedGeneration
}

func TestComputeStatusKeepsTransitionTimes(t *testing.T) {
	tab := mustTable(t, "ecb", "2026-05-15", map[string]string{"USD": "1.1625"})
	q := &Quote{Base: "EUR", Currency: "USD", Rate: "1.1625", Date: "2026-05-15", Source: "ecb"}
	o := outcome{Now: t0, Generation: 1, Sources: ecbOnly(Snapshot{Table: tab, CheckedAt: t0, FetchedAt: t0}), Quote: q, ConfigMapName: "x", StaleAfterDays: 5}
	first := computeStatus(operatorsv1.ExchangeRateStatus{}, o)

	o.Now = t0.Add(time.Hour)
	second := computeStatus(first, o)
	assert.Equal(t, first, second, "nothing changed: identical status, so no write")

	o.Sources[0].Snapshot.Err, o.Sources[0].Snapshot.RetryAt = &FetchError{Reason: operatorsv1.ReasonUpstreamTimeout, Err: errors.New("slow")}, t0.Add(2*time.Hour)
	third := computeStatus(second, o)
	assert.Equal(t, metav1.NewTime(t0), testenv.Condition(third.Conditions, operatorsv1.ConditionReady).LastTransitionTime)
	assert.Equal(t, metav1.NewTime(t0.Add(time.Hour)), testenv.Condition(third.Conditions, operatorsv1.ConditionDegraded).LastTransitionTime)
}

// TestComputeStatusUnchangedRefresh: a pass that learns nothing new (a 304, the same
// publication sent again, another day within the limit, the next retry of an outage)
// returns exactly the status it was given, so Finish writes nothing. Each case
// starts from the status the first fetch wrote, then applies before and after.
func TestComputeStatusUnchangedRefresh(t *testing.T) {
	tab := mustTable(t, "ecb", "2026-05-15", map[string]string{"USD": "1.1625", "GBP": "0.86485"})
	// The same publication as a new table: a 200 instead of a 304 (a mirror without
	// validators, a restarted manager).
	again := mustTable(t, "ecb", "2026-05-15", map[string]string{"USD": "1.1625", "GBP": "0.86485"})
	usd := &Quote{Base: "EUR", Currency: "USD", Rate: "1.1625", Date: "2026-05-15", Source: "ecb"}
	outage := &FetchError{Reason: operatorsv1.ReasonUpstreamServerError, Err: errors.New("https://ecb answered 503 Service Unavailable")}
	first := outcome{Now: t0, Generation: 1, Sources: ecbOnly(Snapshot{Table: tab, CheckedAt: t0, FetchedAt: t0}), Quote: usd,
		ConfigMapName: "usd", StaleAfterDays: 5}
	// at is first, later: now and the cache's answer at that time.
	at := func(now time.Time, fetch Snapshot) outcome {
		o := first
		o.Now, o.Sources = now, ecbOnly(fetch)
		return o
	}
	h := time.Hour

	tests := []struct {
		name          string
		before, after outcome
	}{
		{"304 an hour later", first, at(t0.Add(h), Snapshot{Table: tab, CheckedAt: t0.Add(h), FetchedAt: t0})},
		{"the same publication sent again (200)", first, at(t0.Add(2*h), Snapshot{Table: again, CheckedAt: t0.Add(2 * h), FetchedAt: t0.Add(2 * h)})},
		{"days pass within the limit", first, at(t0.AddDate(0, 0, 5), Snapshot{Table: tab, CheckedAt: t0.AddDate(0, 0, 5), FetchedAt: t0})},
		{"a restarted manager fetches the same publication", first,
			at(t0.AddDate(0, 0, 1), Snapshot{Table: again, CheckedAt: t0.AddDate(0, 0, 1), FetchedAt: t0.AddDate(0, 0, 1)})},
		{"days pass beyond the limit: Stale once, then quiet",
			at(t0.AddDate(0, 0, 6), Snapshot{Table: tab, CheckedAt: t0.AddDate(0, 0, 6), FetchedAt: t0}),
			at(t0.AddDate(0, 0, 9), Snapshot{Table: tab, CheckedAt: t0.AddDate(0, 0, 9), FetchedAt: t0})},
		{"the next retry of an outage",
			at(t0.Add(h), Snapshot{Table: tab, CheckedAt: t0, FetchedAt: t0, Err: outage, RetryAt: t0.Add(h + 30*time.Second)}),
			at(t0.Add(h+30*time.Second), Snapshot{Table: tab, CheckedAt: t0, FetchedAt: t0, Err: outage, RetryAt: t0.Add(h + 90*time.Second)})},
		{"recovered by a 304: Degraded clears once, then quiet",
			at(t0.Add(2*h), Snapshot{Table: tab, CheckedAt: t0.Add(2 * h), FetchedAt: t0}),
			at(t0.Add(3*h), Snapshot{Table: tab, CheckedAt: t0.Add(3 * h), FetchedAt: t0})},
		{"unknown currency, refreshed",
			outcome{Now: t0, Generation: 2, Sources: first.Sources, QuoteErr: &UnknownCurrencyError{Code: "XBT", Source: "ecb", Known: tab.Currencies()},
				ConfigMapName: "usd", StaleAfterDays: 5},
			outcome{Now: t0.Add(h), Generation: 2, Sources: ecbOnly(Snapshot{Table: tab, CheckedAt: t0.Add(h), FetchedAt: t0}),
				QuoteErr: &UnknownCurrencyError{Code: "XBT", Source: "ecb", Known: tab.Currencies()}, ConfigMapName: "usd", StaleAfterDays: 5}},
		{"someone else's ConfigMap, refreshed",
			outcome{Now: t0, Generation: 1, Sources: first.Sources, ConfigMapErr: errConfigMapConflict, ConfigMapName: "usd", StaleAfterDays: 5},
			outcome{Now: t0.Add(h), Generation: 1, Sources: ecbOnly(Snapshot{Table: tab, CheckedAt: t0.Add(h), FetchedAt: t0}),
				ConfigMapErr: errConfigMapConflict, ConfigMapName: "usd", StaleAfterDays: 5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prev := computeStatus(computeStatus(operatorsv1.ExchangeRateStatus{}, first), tt.before)
			assert.Equal(t, prev, computeStatus(prev, tt.after), "nothing new: the same status, so no write")
		})
	}
}

// TestComputeStatusChangesWithState: what does change the status, and how much of it.
func TestComputeStatusChangesWithState(t *testing.T) {
	tab := mustTable(t, "ecb", "2026-05-15", map[string]string{"USD": "1.1625"})
	next := mustTable(t, "ecb", "2026-05-18", map[string]string{"USD": "1.1702"})
	usd := &Quote{Base: "EUR", Currency: "USD", Rate: "1.1625", Date: "2026-05-15", Source: "ecb"}
	first := outcome{Now: t0, Generation: 1, Sources: ecbOnly(Snapshot{Table: tab, CheckedAt: t0, FetchedAt: t0}), Quote: usd,
		ConfigMapName: "usd", StaleAfterDays: 5}
	prev := computeStatus(operatorsv1.ExchangeRateStatus{}, first)
	require.NotNil(t, prev.LastSuccessfulFetch)
	assert.Equal(t, t0, prev.LastSuccessfulFetch.Time)
	monday := time.Date(2026, 5, 18, 16, 5, 0, 0, time.UTC)

	tests := []struct {
		name string
		o    outcome
		// check looks at the new status; the conditions not named in changed must be as before.
		check   func(t *testing.T, st operatorsv1.ExchangeRateStatus)
		changed []string
	}{
		{
			name: "a new publication: rate, date and lastSuccessfulFetch move together",
			o: outcome{Now: monday.Add(time.Minute), Generation: 1, Sources: ecbOnly(Snapshot{Table: next, CheckedAt: monday, FetchedAt: monday}),
				Quote: &Quote{Base: "EUR", Currency: "USD", Rate: "1.1702", Date: "2026-05-18", Source: "ecb"}, ConfigMapName: "usd", StaleAfterDays: 5},
			check: func(t *testing.T, st operatorsv1.ExchangeRateStatus) {
				t.Helper()
				assert.Equal(t, "1.1702", st.Rate)
				assert.Equal(t, "2026-05-18", st.PublicationDate)
				assert.Equal(t, monday, st.LastSuccessfulFetch.Time, "the time of the fetch that brought the rate")
				assert.Equal(t, metav1.NewTime(t0), testenv.Condition(st.Conditions, operatorsv1.ConditionReady).LastTransitionTime, "still Ready")
			},
			changed: []string{operatorsv1.ConditionReady, operatorsv1.ConditionStale}, // messages name the new rate and date
		},
		{
			name: "the limit passes: Stale turns True, nothing else moves",
			o: outcome{Now: t0.AddDate(0, 0, 6), Generation: 1, Sources: ecbOnly(Snapshot{Table: tab, CheckedAt: t0.AddDate(0, 0, 6), FetchedAt: t0}),
				Quote: usd, ConfigMapName: "usd", StaleAfterDays: 5},
			check: func(t *testing.T, st operatorsv1.ExchangeRateStatus) {
				t.Helper()
				stale := testenv.Condition(st.Conditions, operatorsv1.ConditionStale)
				assert.Equal(t, metav1.ConditionTrue, stale.Status)
				assert.Equal(t, metav1.NewTime(t0.AddDate(0, 0, 6)), stale.LastTransitionTime)
				assert.Equal(t, prev.LastSuccessfulFetch, st.LastSuccessfulFetch)
			},
			changed: []string{operatorsv1.ConditionStale},
		},
		{
			name: "an outage begins: Degraded turns True, the rate and its fetch time stay",
			o: outcome{Now: t0.Add(time.Hour), Generation: 1, Sources: ecbOnly(Snapshot{Table: tab, CheckedAt: t0, FetchedAt: t0,
				Err: &FetchError{Reason: operatorsv1.ReasonUpstreamTimeout, Err: errors.New("slow")}, RetryAt: t0.Add(time.Hour + time.Minute)}),
				Quote: usd, ConfigMapName: "usd", StaleAfterDays: 5},
			check: func(t *testing.T, st operatorsv1.ExchangeRateStatus) {
				t.Helper()
				degraded := testenv.Condition(st.Conditions, operatorsv1.ConditionDegraded)
				assert.Equal(t, metav1.ConditionTrue, degraded.Status)
				assert.Equal(t, "slow; keeping rate 1.1625 published 2026-05-15; retrying with backoff", degraded.Message)
				assert.Equal(t, prev.LastSuccessfulFetch, st.LastSuccessfulFetch)
				assert.Equal(t, "1.1625", st.Rate)
			},
			changed: []string{operatorsv1.ConditionDegraded},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := computeStatus(prev, tt.o)
			tt.check(t, st)
			for _, c := range prev.Conditions {
				if !slices.Contains(tt.changed, c.Type) {
					assert.Equal(t, c, testenv.Condition(st.Conditions, c.Type), "%s unchanged", c.Type)
				}
			}
		})
	}
}

func TestStaleFrom(t *testing.T) {
	tests := []struct {
		date  string
		limit int
		want  string
	}{
		{"2026-05-15", 5, "2026-05-21"},
		{"2026-04-02", 5, "2026-04-08"}, // Easter: Thursday's rate is current until Tuesday
		{"2026-12-30", 3, "2027-01-03"},
		{"2028-02-28", 0, "2028-02-29"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, staleFrom(tt.date, tt.limit), "%s + %d days", tt.date, tt.limit)
		d, _ := time.Parse(dateLayout, tt.want)
		age, _ := publicationAgeDays(tt.date, d)
		before, _ := publicationAgeDays(tt.date, d.Add(-time.Second))
		assert.True(t, age > tt.limit && before <= tt.limit, "%s is the first Stale day of %s", tt.want, tt.date)
	}
}

func TestPublicationAgeDays(t *testing.T) {
	tests := []struct {
		date   string
		now    time.Time
		want   int
		wantOK bool
	}{
		{"2026-05-15", time.Date(2026, 5, 15, 0, 0, 1, 0, time.UTC), 0, true},
		{"2026-05-15", time.Date(2026, 5, 18, 15, 59, 0, 0, time.UTC), 3, true},                     // Friday's rate on Monday afternoon
		{"2026-04-02", time.Date(2026, 4, 7, 10, 0, 0, 0, time.UTC), 5, true},                       // Easter: Thursday's rate on Tuesday
		{"2026-05-15", time.Date(2026, 5, 16, 1, 0, 0, 0, time.FixedZone("CEST", 2*3600)), 0, true}, // still the 15th in UTC
		{"2026-05-15", time.Date(2026, 5, 14, 23, 0, 0, 0, time.UTC), -1, true},                     // published "tomorrow": never Stale
		{"", t0, 0, false},
		{"15.05.2026", t0, 0, false},
	}
	for _, tt := range tests {
		got, ok := publicationAgeDays(tt.date, tt.now)
		assert.Equal(t, tt.wantOK, ok, tt.date)
		assert.Equal(t, tt.want, got, "%s at %s", tt.date, tt.now)
	}
}

// ecbOnly is the answer of the one source of an ExchangeRate with the manager's default.
func ecbOnly(s Snapshot) []sourceAnswer {
	return []sourceAnswer{{Name: "ecb", Snapshot: s}}
}

// TestComputeStatusOfSeveralSources: failover, cross-check, several currencies and the
// source limit, as the status shows them.
func TestComputeStatusOfSeveralSources(t *testing.T) {
	now := t0.Add(2 * time.Hour) // Friday 2026-05-15 18:00 UTC
	ecbTab := mustTable(t, "ecb", "2026-05-15", map[string]string{"USD": "1.1625", "GBP": "0.86485"})
	v2Tab := mustTable(t, "frankfurter-v2", "2026-05-15", map[string]string{"USD": "1.163", "GBP": "0.8651"})
	offTab := mustTable(t, "frankfurter-v2", "2026-05-15", map[string]string{"USD": "1.25", "GBP": "0.8651"})
	outage := &FetchError{Reason: operatorsv1.ReasonUpstreamServerError, Err: errors.New("https://ecb answered 503 Service Unavailable")}
	ecbAt, v2At := t0.Add(-time.Hour), t0.Add(-30*time.Minute)
	ecbOK := sourceAnswer{Name: "ecb", Snapshot: Snapshot{Table: ecbTab, CheckedAt: now, FetchedAt: ecbAt}}
	ecbDown := sourceAnswer{Name: "ecb", Snapshot: Snapshot{Table: ecbTab, CheckedAt: ecbAt, FetchedAt: ecbAt, Err: outage, RetryAt: now.Add(time.Minute)}}
	v2 := func(tab *Table) sourceAnswer {
		return sourceAnswer{Name: "frankfurter-v2", Snapshot: Snapshot{Table: tab, CheckedAt: now, FetchedAt: v2At}}
	}
	usd := operatorsv1.ExchangeRateSpec{Currency: "USD"}
	// pass is the outcome of a pass that priced spec from answers and wrote the chosen quote.
	pass := func(spec operatorsv1.ExchangeRateSpec, answers ...sourceAnswer) outcome {
		o := outcome{Now: now, Generation: 2, Sources: answers, ConfigMapName: "usd", StaleAfterDays: 5}
		o.Pricing = priceSpec(answers, spec, now, 5)
		o.Tolerance = toleranceOf(spec)
		if o.Pricing.Chosen >= 0 {
			o.Quote = o.Pricing.Quotes[o.Pricing.Chosen]
		}
		o.QuoteErr = o.Pricing.Err
		return o
	}

	tests := []struct {
		name        string
		o           outcome
		wantConds   map[string]cond
		wantMsg     map[string]string
		wantSource  string
		wantFetched time.Time
		check       func(t *testing.T, st operatorsv1.ExchangeRateStatus)
	}{
		{
			name: "both answer and agree",
			o:    pass(usd, ecbOK, v2(v2Tab)),
			wantConds: map[string]cond{
				operatorsv1.ConditionReady: {metav1.ConditionTrue, operatorsv1.ReasonRateWritten}, operatorsv1.ConditionDegraded: {metav1.ConditionFalse, operatorsv1.ReasonFetchSucceeded},
				operatorsv1.ConditionStale: {metav1.ConditionFalse, operatorsv1.ReasonPublicationCurrent}, operatorsv1.ConditionDivergent: {metav1.ConditionFalse, operatorsv1.ReasonSourcesAgree},
			},
			wantMsg: map[string]string{operatorsv1.ConditionDegraded: "the last fetches from ecb and frankfurter-v2 succeeded",
				operatorsv1.ConditionDivergent: "frankfurter-v2 agrees with ecb within 1%"},
			wantSource: "ecb", wantFetched: ecbAt,
		},
		{
			name: "failover: the ECB fails, the rate is Frankfurter's, Degraded says both",
			o:    pass(usd, ecbDown, v2(v2Tab)),
			wantConds: map[string]cond{
				operatorsv1.ConditionReady: {metav1.ConditionTrue, operatorsv1.ReasonRateWritten}, operatorsv1.ConditionDegraded: {metav1.ConditionTrue, operatorsv1.ReasonUpstreamServerError},
				operatorsv1.ConditionStale: {metav1.ConditionFalse, operatorsv1.ReasonPublicationCurrent}, operatorsv1.ConditionDivergent: {metav1.ConditionUnknown, operatorsv1.ReasonNotCompared},
			},
			wantMsg: map[string]string{
				operatorsv1.ConditionReady:     "ConfigMap usd holds 1.163 USD per EUR, published 2026-05-15 by frankfurter-v2",
				operatorsv1.ConditionDegraded:  "ecb: https://ecb answered 503 Service Unavailable; the rate is frankfurter-v2's; retrying with backoff",
				operatorsv1.ConditionDivergent: "ecb gave no fresh rate to compare with frankfurter-v2's",
			},
			wantSource: "frankfurter-v2", wantFetched: v2At,
		},
		{
			name: "the sources disagree",
			o:    pass(usd, ecbOK, v2(offTab)),
			wantConds: map[string]cond{
				operatorsv1.ConditionReady: {metav1.ConditionTrue, operatorsv1.ReasonRateWritten}, operatorsv1.ConditionDegraded: {metav1.ConditionFalse, operatorsv1.ReasonFetchSucceeded},
				operatorsv1.ConditionStale: {metav1.ConditionFalse, operatorsv1.ReasonPublicationCurrent}, operatorsv1.ConditionDivergent: {metav1.ConditionTrue, operatorsv1.ReasonSourcesDisagree},
			},
			wantMsg:    map[string]string{operatorsv1.ConditionDivergent: "frankfurter-v2 says USD 1.25 (published 2026-05-15), 7.53% from ecb's 1.1625"},
			wantSource: "ecb", wantFetched: ecbAt,
		},
		{
			name: "several currencies",
			o:    pass(operatorsv1.ExchangeRateSpec{Currencies: []string{"USD", "GBP"}, DivergenceTolerance: "0.5%"}, ecbOK, v2(v2Tab)),
			wantConds: map[string]cond{
				operatorsv1.ConditionReady: {metav1.ConditionTrue, operatorsv1.ReasonRateWritten}, operatorsv1.ConditionDegraded: {metav1.ConditionFalse, operatorsv1.ReasonFetchSucceeded},
				operatorsv1.ConditionStale: {metav1.ConditionFalse, operatorsv1.ReasonPublicationCurrent}, operatorsv1.ConditionDivergent: {metav1.ConditionFalse, operatorsv1.ReasonSourcesAgree},
			},
			wantMsg: map[string]string{operatorsv1.ConditionReady: "ConfigMap usd holds 2 rates per EUR (USD 1.1625, GBP 0.86485), published 2026-05-15 by ecb",
				operatorsv1.ConditionDivergent: "within 0.5%"},
			wantSource: "ecb", wantFetched: ecbAt,
			check: func(t *testing.T, st operatorsv1.ExchangeRateStatus) {
				t.Helper()
				assert.Empty(t, st.Rate)
				assert.Equal(t, []operatorsv1.CurrencyRate{{Currency: "USD", Rate: "1.1625"}, {Currency: "GBP", Rate: "0.86485"}}, st.Rates)
			},
		},
		{
			name: "no source publishes the currency",
			o:    pass(operatorsv1.ExchangeRateSpec{Currency: "XBT"}, ecbOK, v2(v2Tab)),
			wantConds: map[string]cond{
				operatorsv1.ConditionReady: {metav1.ConditionFalse, operatorsv1.ReasonUnknownCurrency}, operatorsv1.ConditionDegraded: {metav1.ConditionFalse, operatorsv1.ReasonFetchSucceeded},
				operatorsv1.ConditionStale: {metav1.ConditionUnknown, operatorsv1.ReasonNoPublication}, operatorsv1.ConditionDivergent: {metav1.ConditionUnknown, operatorsv1.ReasonNotCompared},
			},
			wantMsg: map[string]string{operatorsv1.ConditionReady: "no source publishes a rate for XBT: ecb does not publish a rate for XBT (it publishes EUR, GBP, USD); " +
				"frankfurter-v2 does not publish a rate for XBT (it publishes EUR, GBP, USD); waiting for the spec to change"},
		},
		{
			name: "a source beyond the manager's limit",
			o: outcome{Now: now, Generation: 2, SourcesErr: &SourceLimitError{Source: "frankfurter-v2:XYZ", Max: 16},
				ConfigMapName: "usd", StaleAfterDays: 5},
			wantConds: map[string]cond{
				operatorsv1.ConditionReady: {metav1.ConditionFalse, operatorsv1.ReasonTooManySources}, operatorsv1.ConditionDegraded: {metav1.ConditionUnknown, operatorsv1.ReasonTooManySources},
				operatorsv1.ConditionStale: {metav1.ConditionUnknown, operatorsv1.ReasonNoPublication}, operatorsv1.ConditionDivergent: {metav1.ConditionUnknown, operatorsv1.ReasonNotCompared},
			},
			wantMsg: map[string]string{operatorsv1.ConditionReady: "the manager already fetches from 16 sources (--exchangerate-max-sources) and frankfurter-v2:XYZ " +
				"would be one more; name sources other ExchangeRates use, or ask the admin to raise the limit; tried again at every refresh, when a source no ExchangeRate names any more can give its place"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := computeStatus(operatorsv1.ExchangeRateStatus{}, tt.o)
			assert.Equal(t, tt.wantConds, conds(st))
			for typ, sub := range tt.wantMsg {
				assert.Contains(t, testenv.Condition(st.Conditions, typ).Message, sub, typ)
			}
			assert.Equal(t, tt.wantSource, st.Source)
			assert.Equal(t, int64(2), observedGeneration(operatorsv1.ExchangeRateStatus{}, tt.o))
			if tt.wantFetched.IsZero() {
				assert.Nil(t, st.LastSuccessfulFetch)
			} else {
				require.NotNil(t, st.LastSuccessfulFetch)
				assert.Equal(t, tt.wantFetched, st.LastSuccessfulFetch.Time, "the time the source of the rate sent it")
			}
			if tt.check != nil {
				tt.check(t, st)
			}
		})
	}

	t.Log("the other source's rate moving within the tolerance writes nothing: the agreement names no rates")
	first := computeStatus(operatorsv1.ExchangeRateStatus{}, pass(usd, ecbOK, v2(v2Tab)))
	moved := mustTable(t, "frankfurter-v2", "2026-05-16", map[string]string{"USD": "1.1641", "GBP": "0.8655"})
	later := pass(usd, ecbOK, v2(moved))
	later.Now = now.Add(6 * time.Hour)
	assert.Equal(t, first, computeStatus(first, later))
}
