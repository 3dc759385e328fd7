package chaosagent

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	blackadderv1beta1 "github.com/quartet-operator/quartet/api/blackadder/v1beta1"
)

func zone(t testing.TB, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	require.NoError(t, err)
	return loc
}

// utc parses an RFC 3339 instant.
func utc(t testing.TB, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	require.NoError(t, err)
	return v
}

func win(start, end string, days ...blackadderv1beta1.Weekday) blackadderv1beta1.TimeWindow {
	return blackadderv1beta1.TimeWindow{Days: days, Start: start, End: end}
}

var weekdaysMonFri = []blackadderv1beta1.Weekday{"Mon", "Tue", "Wed", "Thu", "Fri"}

func mustSchedule(t testing.TB, in *blackadderv1beta1.ChaosSchedule) schedule {
	t.Helper()
	s, err := parseSchedule(in)
	require.NoError(t, err)
	return s
}

func TestParseSchedule(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   blackadderv1beta1.ChaosSchedule
		err  string
	}{
		{name: "empty schedule", in: blackadderv1beta1.ChaosSchedule{}},
		{name: "whole day", in: blackadderv1beta1.ChaosSchedule{Windows: []blackadderv1beta1.TimeWindow{win("00:00", "24:00")}}},
		{name: "unknown zone", in: blackadderv1beta1.ChaosSchedule{TimeZone: "Mars/Olympus_Mons"}, err: "spec.schedule.timeZone"},
		{name: "the manager's own zone", in: blackadderv1beta1.ChaosSchedule{TimeZone: "Local"}, err: "spec.schedule.timeZone"},
		{name: "start 24:00", in: blackadderv1beta1.ChaosSchedule{Windows: []blackadderv1beta1.TimeWindow{win("24:00", "06:00")}}, err: "spec.schedule.windows[0].start"},
		{name: "end not a time", in: blackadderv1beta1.ChaosSchedule{Windows: []blackadderv1beta1.TimeWindow{win("09:00", "5pm")}}, err: "spec.schedule.windows[0].end"},
		{name: "single-digit hour", in: blackadderv1beta1.ChaosSchedule{Windows: []blackadderv1beta1.TimeWindow{win("9:00", "17:00")}}, err: "spec.schedule.windows[0].start"},
		{name: "no length", in: blackadderv1beta1.ChaosSchedule{Windows: []blackadderv1beta1.TimeWindow{win("09:00", "17:00"), win("10:00", "10:00")}}, err: "spec.schedule.windows[1]"},
		{name: "unknown day", in: blackadderv1beta1.ChaosSchedule{Windows: []blackadderv1beta1.TimeWindow{win("09:00", "17:00", "Monday")}}, err: "spec.schedule.windows[0].days"},
		{name: "date that does not exist", in: blackadderv1beta1.ChaosSchedule{ExcludedDates: []blackadderv1beta1.Date{"2026-02-30"}}, err: "spec.schedule.excludedDates[0]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseSchedule(&tc.in)
			if tc.err == "" {
				assert.NoError(t, err)
				return
			}
			assert.ErrorContains(t, err, tc.err)
		})
	}
}

// TestScheduleOpen: windows are wall-clock times in the schedule's zone, across daylight
// saving changes in both hemispheres, zones with half- and three-quarter-hour offsets,
// windows that cross midnight and excluded dates read in the zone.
func TestScheduleOpen(t *testing.T) {
	berlinOffice := &blackadderv1beta1.ChaosSchedule{TimeZone: "Europe/Berlin", Windows: []blackadderv1beta1.TimeWindow{win("09:00", "17:00", weekdaysMonFri...)}}
	berlin := zone(t, "Europe/Berlin")
	at := func(loc *time.Location, y int, m time.Month, d, h, min int) time.Time {
		return time.Date(y, m, d, h, min, 0, 0, loc)
	}
	for _, tc := range []struct {
		name     string
		schedule *blackadderv1beta1.ChaosSchedule
		at       time.Time
		open     bool
	}{
		{"no schedule is always open", nil, utc(t, "2026-11-28T03:00:00Z"), true},
		{"office: a minute before", berlinOffice, at(berlin, 2026, 11, 26, 8, 59), false},
		{"office: opens at 09:00 (half-open window)", berlinOffice, at(berlin, 2026, 11, 26, 9, 0), true},
		{"office: last minute", berlinOffice, at(berlin, 2026, 11, 26, 16, 59), true},
		{"office: closed at 17:00", berlinOffice, at(berlin, 2026, 11, 26, 17, 0), false},
		{"office: closed on Saturday", berlinOffice, at(berlin, 2026, 11, 28, 10, 0), false},
		{"office: 08:30 UTC is 09:30 in Berlin", berlinOffice, utc(t, "2026-11-26T08:30:00Z"), true},
		{"office read in UTC (default zone): 08:30 is before 09:00",
			&blackadderv1beta1.ChaosSchedule{Windows: berlinOffice.Windows}, utc(t, "2026-11-26T08:30:00Z"), false},
		{"office in summer: 07:30 UTC is 09:30 CEST", berlinOffice, utc(t, "2026-07-01T07:30:00Z"), true},

		// Fri 22:00–02:00 belongs to Friday.
		{"night: Friday before", nightShift(), at(berlin, 2026, 11, 27, 21, 59), false},
		{"night: Friday 22:00", nightShift(), at(berlin, 2026, 11, 27, 22, 0), true},
		{"night: Saturday 00:00", nightShift(), at(berlin, 2026, 11, 28, 0, 0), true},
		{"night: Saturday 01:59", nightShift(), at(berlin, 2026, 11, 28, 1, 59), true},
		{"night: Saturday 02:00", nightShift(), at(berlin, 2026, 11, 28, 2, 0), false},
		{"night: Thursday night is not Friday's", nightShift(), at(berlin, 2026, 11, 26, 23, 0), false},
		{"night: Saturday night is not Friday's", nightShift(), at(berlin, 2026, 11, 28, 23, 0), false},
		{"night: Friday morning belongs to Thursday, which has no window", nightShift(), at(berlin, 2026, 11, 27, 1, 0), false},

		// Excluded dates are dates in the zone.
		{"holiday: the evening before", holidays(), at(berlin, 2026, 12, 23, 23, 59), true},
		{"holiday: at its midnight", holidays(), at(berlin, 2026, 12, 24, 0, 0), false},
		{"holiday: 23:30 UTC on the 23rd is the 24th in Berlin", holidays(), utc(t, "2026-12-23T23:30:00Z"), false},
		{"holiday: the day after", holidays(), at(berlin, 2026, 12, 25, 0, 0), true},
		{"holiday: a night window ends at the excluded date's midnight",
			&blackadderv1beta1.ChaosSchedule{TimeZone: "Europe/Berlin", Windows: []blackadderv1beta1.TimeWindow{win("22:00", "02:00", "Wed")}, ExcludedDates: []blackadderv1beta1.Date{"2026-12-24"}},
			at(berlin, 2026, 12, 24, 1, 0), false},
		{"holiday: the same window before midnight",
			&blackadderv1beta1.ChaosSchedule{TimeZone: "Europe/Berlin", Windows: []blackadderv1beta1.TimeWindow{win("22:00", "02:00", "Wed")}, ExcludedDates: []blackadderv1beta1.Date{"2026-12-24"}},
			at(berlin, 2026, 12, 23, 23, 0), true},

		// Berlin springs forward on 2026-03-29 at 01:00 UTC: 02:00 CET becomes 03:00 CEST.
		{"spring: 02:00–03:00 does not exist, 03:00 CEST is its end", daily("Europe/Berlin", "02:00", "03:00"), utc(t, "2026-03-29T01:00:00Z"), false},
		{"spring: 01:59 CET is before it", daily("Europe/Berlin", "02:00", "03:00"), utc(t, "2026-03-29T00:59:00Z"), false},
		{"spring: 02:30–03:30 is open from 03:00 CEST", daily("Europe/Berlin", "02:30", "03:30"), utc(t, "2026-03-29T01:00:00Z"), true},
		{"spring: and closes at 03:30 CEST", daily("Europe/Berlin", "02:30", "03:30"), utc(t, "2026-03-29T01:30:00Z"), false},
		// Berlin falls back on 2026-10-25 at 01:00 UTC: 03:00 CEST becomes 02:00 CET.
		{"autumn: 02:15 CEST", daily("Europe/Berlin", "02:15", "02:45"), utc(t, "2026-10-25T00:15:00Z"), true},
		{"autumn: 02:45 CEST", daily("Europe/Berlin", "02:15", "02:45"), utc(t, "2026-10-25T00:45:00Z"), false},
		{"autumn: 02:15 CET, the same wall time again", daily("Europe/Berlin", "02:15", "02:45"), utc(t, "2026-10-25T01:15:00Z"), true},
		{"autumn: 02:45 CET", daily("Europe/Berlin", "02:15", "02:45"), utc(t, "2026-10-25T01:45:00Z"), false},

		// New York office hours on both sides of its spring change (2026-03-08).
		{"New York: 09:00 EST is 14:00 UTC", nyOffice(), utc(t, "2026-03-02T14:00:00Z"), true},
		{"New York: 13:30 UTC is 08:30 EST", nyOffice(), utc(t, "2026-03-02T13:30:00Z"), false},
		{"New York: 09:00 EDT is 13:00 UTC", nyOffice(), utc(t, "2026-03-09T13:00:00Z"), true},
		{"New York: 12:30 UTC is 08:30 EDT", nyOffice(), utc(t, "2026-03-09T12:30:00Z"), false},

		// Sydney springs forward on 2026-10-04 at 02:00 AEST (16:00 UTC on the 3rd).
		{"Sydney: 01:59 AEST", daily("Australia/Sydney", "02:00", "04:00"), utc(t, "2026-10-03T15:59:00Z"), false},
		{"Sydney: 03:00 AEDT right after the jump", daily("Australia/Sydney", "02:00", "04:00"), utc(t, "2026-10-03T16:00:00Z"), true},
		{"Sydney: 04:00 AEDT", daily("Australia/Sydney", "02:00", "04:00"), utc(t, "2026-10-03T17:00:00Z"), false},

		{"Kolkata (+05:30): 09:00 is 03:30 UTC", daily("Asia/Kolkata", "09:00", "09:30"), utc(t, "2026-11-26T03:30:00Z"), true},
		{"Kolkata: 03:29 UTC is 08:59", daily("Asia/Kolkata", "09:00", "09:30"), utc(t, "2026-11-26T03:29:00Z"), false},
		{"Chatham (+13:45 in summer): Saturday 00:00 is Friday 10:15 UTC",
			&blackadderv1beta1.ChaosSchedule{TimeZone: "Pacific/Chatham", Windows: []blackadderv1beta1.TimeWindow{win("00:00", "00:15", "Sat")}}, utc(t, "2026-11-27T10:15:00Z"), true},
		{"Chatham: Friday 10:14 UTC is Friday 23:59 there",
			&blackadderv1beta1.ChaosSchedule{TimeZone: "Pacific/Chatham", Windows: []blackadderv1beta1.TimeWindow{win("00:00", "00:15", "Sat")}}, utc(t, "2026-11-27T10:14:00Z"), false},
		{"no windows: open but on excluded dates", &blackadderv1beta1.ChaosSchedule{ExcludedDates: []blackadderv1beta1.Date{"2026-11-26"}}, utc(t, "2026-11-25T23:59:00Z"), true},
		{"no windows: the excluded date", &blackadderv1beta1.ChaosSchedule{ExcludedDates: []blackadderv1beta1.Date{"2026-11-26"}}, utc(t, "2026-11-26T12:00:00Z"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.open, mustSchedule(t, tc.schedule).open(tc.at), "%s", tc.at.UTC())
		})
	}
}

func nightShift() *blackadderv1beta1.ChaosSchedule {
	return &blackadderv1beta1.ChaosSchedule{TimeZone: "Europe/Berlin", Windows: []blackadderv1beta1.TimeWindow{win("22:00", "02:00", "Fri")}}
}

func holidays() *blackadderv1beta1.ChaosSchedule {
	return &blackadderv1beta1.ChaosSchedule{TimeZone: "Europe/Berlin", Windows: []blackadderv1beta1.TimeWindow{win("00:00", "24:00")}, ExcludedDates: []blackadderv1beta1.Date{"2026-12-24"}}
}

func daily(tz, start, end string) *blackadderv1beta1.ChaosSchedule {
	return &blackadderv1beta1.ChaosSchedule{TimeZone: tz, Windows: []blackadderv1beta1.TimeWindow{win(start, end)}}
}

func nyOffice() *blackadderv1beta1.ChaosSchedule {
	return &blackadderv1beta1.ChaosSchedule{TimeZone: "America/New_York", Windows: []blackadderv1beta1.TimeWindow{win("09:00", "17:00", weekdaysMonFri...)}}
}

// TestScheduleNextChange: when the next window opens (outside) or the current one closes
// (inside), in instants, across zones and daylight saving changes.
func TestScheduleNextChange(t *testing.T) {
	berlinOffice := &blackadderv1beta1.ChaosSchedule{TimeZone: "Europe/Berlin", Windows: []blackadderv1beta1.TimeWindow{win("09:00", "17:00", weekdaysMonFri...)}}
	for _, tc := range []struct {
		name     string
		schedule *blackadderv1beta1.ChaosSchedule
		from     string
		want     string // "" when nothing changes within the horizon
	}{
		{"no schedule never changes", nil, "2026-11-28T02:00:00Z", ""},
		{"office: Saturday night to Monday 09:00 CET", berlinOffice, "2026-11-28T02:00:00Z", "2026-11-30T08:00:00Z"},
		{"office: inside, closes at 17:00 CET", berlinOffice, "2026-11-26T09:00:00Z", "2026-11-26T16:00:00Z"},
		{"office: at the close, the next morning", berlinOffice, "2026-11-26T16:00:00Z", "2026-11-27T08:00:00Z"},
		{"office: Friday's close to Monday", berlinOffice, "2026-11-27T16:00:00Z", "2026-11-30T08:00:00Z"},
		{"office: an excluded Monday moves it to Tuesday",
			&blackadderv1beta1.ChaosSchedule{TimeZone: "Europe/Berlin", Windows: berlinOffice.Windows, ExcludedDates: []blackadderv1beta1.Date{"2026-11-30"}},
			"2026-11-28T02:00:00Z", "2026-12-01T08:00:00Z"},
		{"office: the week of the change to summer time opens at 09:00 CEST",
			berlinOffice, "2026-03-28T12:00:00Z", "2026-03-30T07:00:00Z"},
		{"night: inside on Saturday, closes at 02:00", nightShift(), "2026-11-28T00:00:00Z", "2026-11-28T01:00:00Z"},
		{"night: from Saturday to the next Friday 22:00", nightShift(), "2026-11-28T01:00:00Z", "2026-12-04T21:00:00Z"},
		{"spring: the jump itself opens 02:30–03:30", daily("Europe/Berlin", "02:30", "03:30"), "2026-03-29T00:30:00Z", "2026-03-29T01:00:00Z"},
		{"spring: which closes at 03:30 CEST", daily("Europe/Berlin", "02:30", "03:30"), "2026-03-29T01:00:00Z", "2026-03-29T01:30:00Z"},
		{"spring: a window in the skipped hour opens the next day", daily("Europe/Berlin", "02:00", "03:00"), "2026-03-29T00:30:00Z", "2026-03-30T00:00:00Z"},
		{"autumn: 02:15 CEST", daily("Europe/Berlin", "02:15", "02:45"), "2026-10-24T23:00:00Z", "2026-10-25T00:15:00Z"},
		{"autumn: the repeated 02:15 opens again in CET", daily("Europe/Berlin", "02:15", "02:45"), "2026-10-25T00:45:00Z", "2026-10-25T01:15:00Z"},
		{"autumn: the clock falling back into a window opens it", daily("Europe/Berlin", "01:00", "02:30"), "2026-10-25T00:30:00Z", "2026-10-25T01:00:00Z"},
		{"New York: weekend to Monday 09:00 EDT", nyOffice(), "2026-03-07T17:00:00Z", "2026-03-09T13:00:00Z"},
		{"Sydney: the jump opens 02:00–04:00", daily("Australia/Sydney", "02:00", "04:00"), "2026-10-03T15:00:00Z", "2026-10-03T16:00:00Z"},
		{"Kolkata: closes at 09:30 (+05:30)", daily("Asia/Kolkata", "09:00", "09:30"), "2026-11-26T03:30:00Z", "2026-11-26T04:00:00Z"},
		{"an excluded day ends at its midnight in the zone", &blackadderv1beta1.ChaosSchedule{TimeZone: "Europe/Berlin", ExcludedDates: []blackadderv1beta1.Date{"2026-11-26"}},
			"2026-11-26T10:00:00Z", "2026-11-26T23:00:00Z"},
		{"open all the time never changes", &blackadderv1beta1.ChaosSchedule{TimeZone: "Europe/Berlin"}, "2026-11-26T10:00:00Z", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := mustSchedule(t, tc.schedule).nextChange(utc(t, tc.from))
			if tc.want == "" {
				assert.False(t, ok, "changes at %s", got.UTC())
				return
			}
			require.True(t, ok)
			assert.Equal(t, utc(t, tc.want), got.UTC())
		})
	}
}

// TestScheduleNextChangeMatchesAMinuteByMinuteWalk checks nextChange against the obvious
// slow answer: walk the wall clock minute by minute from a random instant until open
// changes, for random windows in zones with daylight saving changes in both hemispheres and
// with odd offsets, starting near their changes.
func TestScheduleNextChangeMatchesAMinuteByMinuteWalk(t *testing.T) {
	zones := []string{"Europe/Berlin", "America/New_York", "Australia/Sydney", "Asia/Kolkata", "Pacific/Chatham", "UTC"}
	starts := []string{"2026-03-27T00:00:00Z", "2026-10-23T00:00:00Z", "2026-03-06T00:00:00Z", "2026-10-30T00:00:00Z", "2026-04-03T00:00:00Z", "2026-10-02T00:00:00Z"}
	days := []blackadderv1beta1.Weekday{"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"}
	clock := func(rng *rand.Rand) string { return fmt.Sprintf("%02d:%02d", rng.IntN(24), rng.IntN(4)*15) }
	rng := rand.New(rand.NewPCG(25, 25))
	const walk = 4 * 24 * 60 // minutes
	for i := 0; i < 300; i++ {
		in := &blackadderv1beta1.ChaosSchedule{TimeZone: zones[rng.IntN(len(zones))]}
		for w := rng.IntN(3); w >= 0; w-- {
			start, end := clock(rng), clock(rng)
			if start == end {
				end = "24:00"
			}
			tw := win(start, end)
			for _, d := range days {
				if rng.IntN(3) == 0 {
					tw.Days = append(tw.Days, d)
				}
			}
			in.Windows = append(in.Windows, tw)
		}
		from := utc(t, starts[rng.IntN(len(starts))]).Add(time.Duration(rng.IntN(3*24*60)) * time.Minute).Add(time.Duration(rng.IntN(60)) * time.Second)
		if rng.IntN(4) == 0 {
			in.ExcludedDates = []blackadderv1beta1.Date{blackadderv1beta1.Date(from.Add(time.Duration(rng.IntN(72)) * time.Hour).Format(time.DateOnly))}
		}
		s := mustSchedule(t, in)
		state := s.open(from)
		var want time.Time
		for m := from.Truncate(time.Minute).Add(time.Minute); m.Before(from.Add(walk * time.Minute)); m = m.Add(time.Minute) {
			if s.open(m) != state {
				want = m
				break
			}
		}
		got, ok := s.nextChange(from)
		if want.IsZero() {
			if ok {
				assert.True(t, !got.Before(from.Add(walk*time.Minute-time.Minute)), "case %d %+v from %s: change at %s, the walk saw none", i, in, from, got)
			}
			continue
		}
		require.True(t, ok, "case %d %+v from %s: no change, the walk saw %s", i, in, from, want)
		assert.Equal(t, want.UTC(), got.UTC(), "case %d %+v from %s", i, in, from)
	}
}

func TestWindowAtDescribesTheNextWindow(t *testing.T) {
	w := windowAt(mustSchedule(t, &blackadderv1beta1.ChaosSchedule{TimeZone: "Europe/Berlin",
		Windows: []blackadderv1beta1.TimeWindow{win("09:00", "17:00", weekdaysMonFri...)}}), utc(t, "2026-11-28T02:00:00Z"))
	assert.True(t, w.Scheduled)
	assert.False(t, w.Open)
	require.NotNil(t, w.Change)
	assert.Equal(t, "2026-11-30T09:00:00+01:00 (Mon 09:00 Europe/Berlin)", w.describe(*w.Change))

	none := windowAt(schedule{}, utc(t, "2026-11-28T02:00:00Z"))
	assert.False(t, none.Scheduled)
	assert.True(t, none.Open)
	assert.Nil(t, none.Change)
}

// BenchmarkScheduleNextChange is the cost a pass pays to know when the window changes: a
// dense schedule (32 windows) and a sparse one whose next window is a year away.
func BenchmarkScheduleNextChange(b *testing.B) {
	dense := &blackadderv1beta1.ChaosSchedule{TimeZone: "Europe/Berlin"}
	for h := 0; h < 32; h++ {
		dense.Windows = append(dense.Windows, win(fmt.Sprintf("%02d:00", h%24), fmt.Sprintf("%02d:30", h%24), "Sat"))
	}
	sparse := &blackadderv1beta1.ChaosSchedule{TimeZone: "Europe/Berlin", Windows: []blackadderv1beta1.TimeWindow{win("09:00", "10:00", "Mon")}}
	from := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for d := 0; d < 366; d++ {
		if day := from.AddDate(0, 0, d); day.Weekday() == time.Monday {
			sparse.ExcludedDates = append(sparse.ExcludedDates, blackadderv1beta1.Date(day.Format(time.DateOnly)))
		}
	}
	for name, in := range map[string]*blackadderv1beta1.ChaosSchedule{"dense": dense, "year-away": sparse} {
		s := mustSchedule(b, in)
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if _, ok := s.nextChange(from); !ok {
					b.Fatal("no change")
				}
			}
		})
	}
}
