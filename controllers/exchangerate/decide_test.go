package exchangerate

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestNextRefresh(t *testing.T) {
	zero := func() float64 { return 0 }
	half := func() float64 { return 0.5 }
	threeQuarters := func() float64 { return 0.75 }
	tab := &Table{Source: "ecb"}
	fetchErr := &FetchError{Reason: ReasonUpstreamServerError, Err: errors.New("503")}
	tests := []struct {
		name     string
		o        outcome
		interval time.Duration
		random   func() float64
		want     time.Duration
	}{
		{name: "fresh table: when it turns older than the interval",
			o:        outcome{Now: t0.Add(10 * time.Minute), Fetch: Snapshot{Table: tab, CheckedAt: t0}},
			interval: time.Hour, random: zero, want: 50 * time.Minute},
		{name: "jitter is up to a tenth of the interval",
			o:        outcome{Now: t0.Add(10 * time.Minute), Fetch: Snapshot{Table: tab, CheckedAt: t0}},
			interval: time.Hour, random: half, want: 53 * time.Minute},
		{name: "jitter spreads over the whole tenth",
			o:        outcome{Now: t0, Fetch: Snapshot{Table: tab, CheckedAt: t0}},
			interval: time.Hour, random: threeQuarters, want: 64*time.Minute + 30*time.Second},
		{name: "after a failure: at the retry time",
			o:        outcome{Now: t0, Fetch: Snapshot{Table: tab, CheckedAt: t0.Add(-2 * time.Hour), Err: fetchErr, RetryAt: t0.Add(2 * time.Minute)}},
			interval: time.Hour, random: zero, want: 2 * time.Minute},
		{name: "after a failure: jitter a tenth of the backoff",
			o:        outcome{Now: t0, Fetch: Snapshot{Err: fetchErr, RetryAt: t0.Add(2 * time.Minute)}},
			interval: time.Hour, random: half, want: 2*time.Minute + 6*time.Second},
		{name: "unknown currency: wait for the spec to change",
			o:        outcome{Now: t0, Fetch: Snapshot{Table: tab, CheckedAt: t0}, QuoteErr: &UnknownCurrencyError{Code: "XYZ"}},
			interval: time.Hour, random: half, want: 0},
		{name: "unknown currency during an outage: still no requeue",
			o:        outcome{Now: t0, Fetch: Snapshot{Table: tab, Err: fetchErr, RetryAt: t0.Add(time.Minute)}, QuoteErr: &UnknownCurrencyError{Code: "XYZ"}},
			interval: time.Hour, random: half, want: 0},
		{name: "overdue check: never a hot loop",
			o:        outcome{Now: t0.Add(3 * time.Hour), Fetch: Snapshot{Table: tab, CheckedAt: t0}},
			interval: time.Hour, random: zero, want: time.Second},
		{name: "retry already due: never a hot loop",
			o:        outcome{Now: t0, Fetch: Snapshot{Err: fetchErr, RetryAt: t0.Add(-time.Minute)}},
			interval: time.Hour, random: half, want: time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, nextRefresh(tt.o, tt.interval, tt.random))
		})
	}
}
