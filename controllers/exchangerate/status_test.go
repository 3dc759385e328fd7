package exchangerate

import (
	"errors"
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
	goodPrev := operatorsv1.ExchangeRateStatus{
		ObservedGeneration: 2, Rate: "1.1", PublicationDate: "2026-05-14", Source: "ecb", ConfigMapName: "exchange-rate-usd",
		Conditions: []metav1.Condition{
			{Type: ConditionReady, Status: metav1.ConditionTrue, Reason: ReasonRateWritten, LastTransitionTime: metav1.NewTime(t0.Add(-24 * time.Hour))},
			{Type: ConditionDegraded, Status: metav1.ConditionFalse, Reason: ReasonFetchSucceeded, LastTransitionTime: metav1.NewTime(t0.Add(-24 * time.Hour))},
			{Type: ConditionStale, Status: metav1.ConditionFalse, Reason: ReasonPublicationCurrent, LastTransitionTime: metav1.NewTime(t0.Add(-24 * time.Hour))},
		},
	}
	outage := &FetchError{Reason: ReasonUpstreamServerError, Err: errors.New("https://ecb answered 503 Service Unavailable")}

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
			o: outcome{Now: now, Generation: 3, Fetch: Snapshot{Table: tab, CheckedAt: now}, Quote: usd,
				ConfigMapName: "exchange-rate-usd", StaleAfterDays: 5},
			wantConds: map[string]cond{
				ConditionReady:    {metav1.ConditionTrue, ReasonRateWritten},
				ConditionDegraded: {metav1.ConditionFalse, ReasonFetchSucceeded},
				ConditionStale:    {metav1.ConditionFalse, ReasonPublicationCurrent},
			},
			wantRate: "1.1625", wantDate: "2026-05-15", wantObsGen: 3, wantFetched: &t0,
			wantMsg: map[string]string{ConditionReady: "ConfigMap exchange-rate-usd holds 1.1625 USD per EUR, published 2026-05-15 by ecb"},
		},
		{
			name: "outage: last good table still prices, Degraded says why",
			prev: goodPrev,
			o: outcome{Now: now, Generation: 3, Fetch: Snapshot{Table: tab, CheckedAt: t0.Add(-time.Hour), Err: outage, RetryAt: t0.Add(time.Minute)},
				Quote: usd, ConfigMapName: "exchange-rate-usd", StaleAfterDays: 5},
			wantConds: map[string]cond{
				ConditionReady:    {metav1.ConditionTrue, ReasonRateWritten},
				ConditionDegraded: {metav1.ConditionTrue, ReasonUpstreamServerError},
				ConditionStale:    {metav1.ConditionFalse, ReasonPublicationCurrent},
			},
			wantRate: "1.1625", wantDate: "2026-05-15", wantObsGen: 3, wantFetched: ptrTime(t0.Add(-time.Hour)),
			wantMsg: map[string]string{ConditionDegraded: "503 Service Unavailable; keeping rate 1.1625 published 2026-05-15; next attempt after 2026-05-15T16:01:00Z"},
		},
		{
			name: "first fetch fails: no rate yet",
			o:    outcome{Now: now, Generation: 1, Fetch: Snapshot{Err: outage, RetryAt: t0.Add(time.Minute)}, ConfigMapName: "x", StaleAfterDays: 5},
			wantConds: map[string]cond{
				ConditionReady:    {metav1.ConditionFalse, ReasonRateUnavailable},
				ConditionDegraded: {metav1.ConditionTrue, ReasonUpstreamServerError},
				ConditionStale:    {metav1.ConditionUnknown, ReasonNoPublication},
			},
			wantObsGen: 1,
			wantMsg:    map[string]string{ConditionReady: "no rate yet: https://ecb answered 503", ConditionDegraded: "no rate has been fetched yet"},
		},
		{
			name: "unknown currency keeps the last good rate",
			prev: goodPrev,
			o: outcome{Now: now, Generation: 4, Fetch: Snapshot{Table: tab, CheckedAt: now},
				QuoteErr: &UnknownCurrencyError{Code: "XYZ", Source: "ecb", Known: []string{"EUR", "USD"}}, ConfigMapName: "exchange-rate-usd", StaleAfterDays: 5},
			wantConds: map[string]cond{
				ConditionReady:    {metav1.ConditionFalse, ReasonUnknownCurrency},
				ConditionDegraded: {metav1.ConditionFalse, ReasonFetchSucceeded},
				ConditionStale:    {metav1.ConditionFalse, ReasonPublicationCurrent},
			},
			wantRate: "1.1", wantDate: "2026-05-14", wantObsGen: 4, wantFetched: &t0,
			wantMsg: map[string]string{ConditionReady: "ecb does not publish a rate for XYZ (it publishes EUR, USD); waiting for the spec to change"},
		},
		{
			name: "someone else's ConfigMap",
			o: outcome{Now: now, Generation: 1, Fetch: Snapshot{Table: tab, CheckedAt: now}, ConfigMapErr: errConfigMapConflict,
				ConfigMapName: "exchange-rate-usd", StaleAfterDays: 5},
			wantConds: map[string]cond{
				ConditionReady:    {metav1.ConditionFalse, ReasonConfigMapConflict},
				ConditionDegraded: {metav1.ConditionFalse, ReasonFetchSucceeded},
				ConditionStale:    {metav1.ConditionUnknown, ReasonNoPublication},
			},
			wantObsGen: 1, wantFetched: &t0,
		},
		{
			name: "API error writing the ConfigMap: generation not observed",
			prev: goodPrev,
			o: outcome{Now: now, Generation: 3, Fetch: Snapshot{Table: tab, CheckedAt: now}, ConfigMapErr: errors.New("etcd timeout"),
				ConfigMapName: "exchange-rate-usd", StaleAfterDays: 5},
			wantConds: map[string]cond{
				ConditionReady:    {metav1.ConditionFalse, ReasonConfigMapFailed},
				ConditionDegraded: {metav1.ConditionFalse, ReasonFetchSucceeded},
				ConditionStale:    {metav1.ConditionFalse, ReasonPublicationCurrent},
			},
			wantRate: "1.1", wantDate: "2026-05-14", wantObsGen: 2, wantFetched: &t0,
			wantMsg: map[string]string{ConditionReady: "writing ConfigMap exchange-rate-usd: etcd timeout"},
		},
		{
			name: "publication older than the limit is Stale",
			o: outcome{Now: t0.AddDate(0, 0, 6), Generation: 1, Fetch: Snapshot{Table: tab, CheckedAt: t0.AddDate(0, 0, 6)}, Quote: usd,
				ConfigMapName: "exchange-rate-usd", StaleAfterDays: 5},
			wantConds: map[string]cond{
				ConditionReady:    {metav1.ConditionTrue, ReasonRateWritten},
				ConditionDegraded: {metav1.ConditionFalse, ReasonFetchSucceeded},
				ConditionStale:    {metav1.ConditionTrue, ReasonPublicationOld},
			},
			wantRate: "1.1625", wantDate: "2026-05-15", wantObsGen: 1, wantFetched: ptrTime(t0.AddDate(0, 0, 6)),
			wantMsg: map[string]string{ConditionStale: "published 2026-05-15, 6 days ago; the limit is 5 days"},
		},
		{
			name: "publication exactly at the limit is not Stale",
			o: outcome{Now: t0.AddDate(0, 0, 5), Generation: 1, Fetch: Snapshot{Table: tab, CheckedAt: t0.AddDate(0, 0, 5)}, Quote: usd,
				ConfigMapName: "exchange-rate-usd", StaleAfterDays: 5},
			wantConds: map[string]cond{
				ConditionReady:    {metav1.ConditionTrue, ReasonRateWritten},
				ConditionDegraded: {metav1.ConditionFalse, ReasonFetchSucceeded},
				ConditionStale:    {metav1.ConditionFalse, ReasonPublicationCurrent},
			},
			wantRate: "1.1625", wantDate: "2026-05-15", wantObsGen: 1, wantFetched: ptrTime(t0.AddDate(0, 0, 5)),
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
			assert.Equal(t, tt.wantObsGen, st.ObservedGeneration)
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

func TestComputeStatusKeepsTransitionTimes(t *testing.T) {
	tab := mustTable(t, "ecb", "2026-05-15", map[string]string{"USD": "1.1625"})
	q := &Quote{Base: "EUR", Currency: "USD", Rate: "1.1625", Date: "2026-05-15", Source: "ecb"}
	o := outcome{Now: t0, Generation: 1, Fetch: Snapshot{Table: tab, CheckedAt: t0}, Quote: q, ConfigMapName: "x", StaleAfterDays: 5}
	first := computeStatus(operatorsv1.ExchangeRateStatus{}, o)

	o.Now = t0.Add(time.Hour)
	second := computeStatus(first, o)
	assert.Equal(t, first, second, "nothing changed: identical status, so no write")

	o.Fetch.Err, o.Fetch.RetryAt = &FetchError{Reason: ReasonUpstreamTimeout, Err: errors.New("slow")}, t0.Add(2*time.Hour)
	third := computeStatus(second, o)
	assert.Equal(t, metav1.NewTime(t0), testenv.Condition(third.Conditions, ConditionReady).LastTransitionTime)
	assert.Equal(t, metav1.NewTime(t0.Add(time.Hour)), testenv.Condition(third.Conditions, ConditionDegraded).LastTransitionTime)
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
