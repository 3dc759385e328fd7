package exchangerate

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"
)

// utc is a time in UTC, the zone the tables' expectations are written in.
func utc(year int, month time.Month, day, hour, minute int) time.Time {
	return time.Date(year, month, day, hour, minute, 0, 0, time.UTC)
}

func zone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	require.NoError(t, err)
	return loc
}

// TestScheduleLast: the ECB's last due time (16:00 CET or CEST, plus 10 minutes) as seen at
// moments given in several zones, across weekends, both changes of daylight saving time
// and the TARGET holidays.
func TestScheduleLast(t *testing.T) {
	ecb := ecbSchedule()
	tokyo, newYork, berlin := zone(t, "Asia/Tokyo"), zone(t, "America/New_York"), zone(t, "Europe/Berlin")
	tests := []struct {
		name     string
		at       time.Time
		want     time.Time
		wantDate string
	}{
		{"summer: one second before today's due time is yesterday's", utc(2026, 5, 15, 14, 9).Add(59 * time.Second),
			utc(2026, 5, 14, 14, 10), "2026-05-14"},
		{"summer: 16:10 CEST is 14:10 UTC", utc(2026, 5, 15, 14, 10), utc(2026, 5, 15, 14, 10), "2026-05-15"},
		{"the same moment written in Tokyo", time.Date(2026, 5, 15, 23, 10, 0, 0, tokyo), utc(2026, 5, 15, 14, 10), "2026-05-15"},
		{"Saturday: Friday's", utc(2026, 5, 16, 10, 0), utc(2026, 5, 15, 14, 10), "2026-05-15"},
		{"Monday morning in New York: Friday's", time.Date(2026, 5, 18, 8, 0, 0, 0, newYork), utc(2026, 5, 15, 14, 10), "2026-05-15"},
		{"Tuesday after midnight in Berlin, still Monday in UTC: Monday's", time.Date(2026, 5, 19, 0, 30, 0, 0, berlin),
			utc(2026, 5, 18, 14, 10), "2026-05-18"},
		{"winter: 16:10 CET is 15:10 UTC", utc(2026, 1, 13, 15, 10), utc(2026, 1, 13, 15, 10), "2026-01-13"},
		{"winter: at 14:10 UTC not yet", utc(2026, 1, 13, 14, 10), utc(2026, 1, 12, 15, 10), "2026-01-12"},
		{"first day of summer time (Monday 30 March 2026): 14:10 UTC", utc(2026, 3, 30, 14, 30), utc(2026, 3, 30, 14, 10), "2026-03-30"},
		{"first day of summer time, before: Friday's, in winter time", utc(2026, 3, 30, 14, 0), utc(2026, 3, 27, 15, 10), "2026-03-27"},
		{"first day of winter time (Monday 26 October 2026): 15:10 UTC", utc(2026, 10, 26, 15, 0), utc(2026, 10, 23, 14, 10), "2026-10-23"},
		{"Easter Monday: Thursday's (Good Friday and Easter Monday closed)", utc(2026, 4, 6, 20, 0), utc(2026, 4, 2, 14, 10), "2026-04-02"},
		{"Labour Day on a Friday: Thursday's", utc(2026, 5, 1, 18, 0), utc(2026, 4, 30, 14, 10), "2026-04-30"},
		{"Boxing Day: Christmas Eve's", utc(2026, 12, 26, 12, 0), utc(2026, 12, 24, 15, 10), "2026-12-24"},
		{"New Year's Day: New Year's Eve's", utc(2027, 1, 1, 18, 0), utc(2026, 12, 31, 15, 10), "2026-12-31"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, date := ecb.Last(tt.at)
			assert.True(t, tt.want.Equal(got), "Last(%s) = %s, want %s", tt.at, got.UTC(), tt.want)
			assert.Equal(t, tt.wantDate, date)
		})
	}
	got, date := Schedule{}.Last(utc(2026, 5, 15, 16, 0))
	assert.True(t, got.IsZero(), "the zero Schedule publishes never")
	assert.Empty(t, date)
}

func TestScheduleNext(t *testing.T) {
	ecb := ecbSchedule()
	tests := []struct {
		name  string
		after time.Time
		want  time.Time
	}{
		{"in the morning: today's", utc(2026, 5, 15, 6, 0), utc(2026, 5, 15, 14, 10)},
		{"at the due time: the next day's", utc(2026, 5, 14, 14, 10), utc(2026, 5, 15, 14, 10)},
		{"Friday evening: Monday's", utc(2026, 5, 15, 18, 0), utc(2026, 5, 18, 14, 10)},
		{"Friday before the change to summer time: Monday's, an hour earlier in UTC", utc(2026, 3, 27, 16, 0), utc(2026, 3, 30, 14, 10)},
		{"Friday before the change to winter time: Monday's, an hour later in UTC", utc(2026, 10, 23, 16, 0), utc(2026, 10, 26, 15, 10)},
		{"Maundy Thursday: Tuesday after Easter", utc(2026, 4, 2, 14, 10), utc(2026, 4, 7, 14, 10)},
		{"Easter 2027 falls in March", utc(2027, 3, 25, 16, 0), utc(2027, 3, 30, 14, 10)},
		{"Christmas Eve: the Monday after", utc(2026, 12, 24, 15, 10), utc(2026, 12, 28, 15, 10)},
		{"New Year's Eve: the first Monday of the year", utc(2026, 12, 31, 15, 10), utc(2027, 1, 4, 15, 10)},
		{"the evening before Labour Day on a Friday: Monday's", utc(2026, 4, 30, 20, 0), utc(2026, 5, 4, 14, 10)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ecb.Next(tt.after)
			assert.True(t, tt.want.Equal(got), "Next(%s) = %s, want %s", tt.after, got.UTC(), tt.want)
		})
	}
	assert.True(t, Schedule{}.Next(utc(2026, 5, 15, 6, 0)).IsZero())
	assert.True(t, frankfurterECBSchedule().Next(utc(2026, 5, 15, 6, 0)).Equal(utc(2026, 5, 15, 14, 45)),
		"Frankfurter serves the ECB's rates 45 minutes after the ECB's time")
}

func TestEasterSunday(t *testing.T) {
	for year, want := range map[int]string{
		2024: "2024-03-31", 2025: "2025-04-20", 2026: "2026-04-05", 2027: "2027-03-28", 2038: "2038-04-25", 2285: "2285-03-22",
	} {
		assert.Equal(t, want, easterSunday(year).Format(dateLayout), "%d", year)
	}
}

func TestTargetClosed(t *testing.T) {
	closed := []string{"2026-01-01", "2026-04-03", "2026-04-06", "2026-05-01", "2026-12-25", "2026-12-26", "2027-03-26", "2027-03-29"}
	open := []string{"2026-01-02", "2026-04-02", "2026-04-07", "2026-05-14", "2026-05-25", "2026-10-03", "2026-12-24", "2026-12-31"}
	for _, d := range closed {
		day, _ := time.Parse(dateLayout, d)
		assert.True(t, targetClosed(day.Year(), day.Month(), day.Day()), d)
	}
	for _, d := range open {
		day, _ := time.Parse(dateLayout, d)
		assert.False(t, targetClosed(day.Year(), day.Month(), day.Day()), d)
	}
}

// TestDueAt: when a source's table is next due, for the ECB's schedule and without one.
func TestDueAt(t *testing.T) {
	ecb := ecbSchedule()
	table := func(date string) *Table { return &Table{Source: "ecb", Date: date} }
	six := 6 * time.Hour
	tests := []struct {
		name     string
		s        Snapshot
		schedule Schedule
		interval time.Duration
		want     time.Time
	}{
		{"no table: now", Snapshot{}, ecb, six, time.Time{}},
		{"no schedule: the interval", Snapshot{Table: table("2026-05-14"), CheckedAt: utc(2026, 5, 15, 10, 0)}, Schedule{}, six, utc(2026, 5, 15, 16, 0)},
		{"the publication comes before the interval ends", Snapshot{Table: table("2026-05-14"), CheckedAt: utc(2026, 5, 15, 10, 0)}, ecb, six,
			utc(2026, 5, 15, 14, 10)},
		{"right after the publication, with it: the interval", Snapshot{Table: table("2026-05-15"), CheckedAt: utc(2026, 5, 15, 14, 10)}, ecb, six,
			utc(2026, 5, 15, 20, 10)},
		{"the publication is late: again in 15 minutes", Snapshot{Table: table("2026-05-14"), CheckedAt: utc(2026, 5, 15, 14, 10)}, ecb, six,
			utc(2026, 5, 15, 14, 25)},
		{"still late near the end of the window", Snapshot{Table: table("2026-05-14"), CheckedAt: utc(2026, 5, 15, 17, 5)}, ecb, six,
			utc(2026, 5, 15, 17, 20)},
		{"late beyond the window: a day off the calendar does not know; the interval", Snapshot{Table: table("2026-05-14"),
			CheckedAt: utc(2026, 5, 15, 17, 15)}, ecb, six, utc(2026, 5, 15, 23, 15)},
		{"a night: the interval, not every hour", Snapshot{Table: table("2026-05-15"), CheckedAt: utc(2026, 5, 15, 22, 0)}, ecb, six,
			utc(2026, 5, 16, 4, 0)},
		{"a night with spec.refreshInterval 1h: hourly, as asked", Snapshot{Table: table("2026-05-15"), CheckedAt: utc(2026, 5, 15, 22, 0)}, ecb, time.Hour,
			utc(2026, 5, 15, 23, 0)},
		{"a long interval over the weekend: Monday's publication", Snapshot{Table: table("2026-05-15"), CheckedAt: utc(2026, 5, 15, 18, 0)}, ecb, 168 * time.Hour,
			utc(2026, 5, 18, 14, 10)},
		{"a mirror a day behind after the window: not late any more at the next publication", Snapshot{Table: table("2026-05-13"),
			CheckedAt: utc(2026, 5, 15, 20, 0)}, ecb, 168 * time.Hour, utc(2026, 5, 18, 14, 10)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := dueAt(tt.s, tt.schedule, tt.interval)
			assert.True(t, tt.want.Equal(got), "dueAt = %s, want %s", got.UTC(), tt.want)
		})
	}
}

// TestRateCacheFollowsPublications runs the ECB's cache for eight days on a fake clock, asked
// every minute (as thousands of ExchangeRates waking would ask it), with an upstream that
// publishes at 16:00 CET or CEST on working days: each publication is fetched within
// minutes, and the nights and the weekend cost a fetch per default interval, not one per hour.
func TestRateCacheFollowsPublications(t *testing.T) {
	start := utc(2026, 3, 23, 0, 0) // the week summer time begins, Monday
	clk := clocktesting.NewFakePassiveClock(start)
	ecb := ecbSchedule()
	var fetches []time.Time
	src := scheduledSource{name: "test-week", schedule: ecb, fetch: func(_ context.Context, prev *Table) (*Table, error) {
		now := clk.Now()
		fetches = append(fetches, now)
		// What the ECB shows at now: the publication of 16:00 local time (not 16:10).
		_, date := Schedule{Location: ecb.Location, Hour: 16, Closed: targetClosed}.Last(now)
		if prev != nil && prev.Date == date {
			return prev, nil
		}
		return mustTable(t, "test-week", date, map[string]string{"USD": "1.1"}), nil
	}}
	c := NewRateCache(src, clk, exponentialBackoff(time.Minute, time.Hour), time.Second)
	for now := start; now.Before(start.AddDate(0, 0, 8)); now = now.Add(time.Minute) {
		clk.SetTime(now)
		c.Get(context.Background(), DefaultOptions().RefreshInterval)
	}

	var afterPublication []time.Time
	for _, f := range fetches {
		if local := f.In(ecb.Location); ecb.publishes(local) && local.Hour() == 16 && local.Minute() == 10 {
			afterPublication = append(afterPublication, f)
		}
	}
	assert.Equal(t, []time.Time{utc(2026, 3, 23, 15, 10), utc(2026, 3, 24, 15, 10), utc(2026, 3, 25, 15, 10), utc(2026, 3, 26, 15, 10),
		utc(2026, 3, 27, 15, 10), utc(2026, 3, 30, 14, 10)}, afterPublication,
		"each working day's publication ten minutes after 16:00 local time, in winter and in summer time")
	// At most a fetch every 6 hours plus the one after each publication: 8×4 + 6.
	assert.LessOrEqual(t, len(fetches), 8*4+6, "fetched at %v", fetches)
	t.Logf("%d fetches in 8 days; hourly polling: %d", len(fetches), 8*24)
}

// scheduledSource is a Source with a publication schedule.
type scheduledSource struct {
	name     string
	schedule Schedule
	fetch    func(context.Context, *Table) (*Table, error)
}

func (s scheduledSource) Name() string                                        { return s.name }
func (s scheduledSource) Schedule() Schedule                                  { return s.schedule }
func (s scheduledSource) Fetch(ctx context.Context, p *Table) (*Table, error) { return s.fetch(ctx, p) }
