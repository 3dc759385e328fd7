package exchangerate

import (
	"time"
	// The publishers' zones, whatever the image carries.
	_ "time/tzdata"
)

// Schedule says when a source publishes (weekdays not Closed, at a local time) and how long
// After that it is asked. The zero Schedule knows none: the periodic refresh only.
type Schedule struct {
	Location     *time.Location
	Hour, Minute int
	After        time.Duration
	Closed       func(year int, month time.Month, day int) bool
}

// lookaround bounds the search for a publishing day (TARGET pauses four days at most).
const lookaround = 15

// A publication due but late is polled for every catchUpInterval for catchUpWindow.
const (
	catchUpInterval = 15 * time.Minute
	catchUpWindow   = 3 * time.Hour
)

// IsZero reports whether s knows no publication time.
func (s Schedule) IsZero() bool { return s.Location == nil }

// publishes reports whether s publishes on the local day.
func (s Schedule) publishes(day time.Time) bool {
	if wd := day.Weekday(); wd == time.Saturday || wd == time.Sunday {
		return false
	}
	return s.Closed == nil || !s.Closed(day.Year(), day.Month(), day.Day())
}

// due is when the publication of the local day is asked for: its time plus After.
func (s Schedule) due(day time.Time) time.Time {
	return time.Date(day.Year(), day.Month(), day.Day(), s.Hour, s.Minute, 0, 0, s.Location).Add(s.After)
}

// Last returns the latest due time not after t and that publication's (local) date.
func (s Schedule) Last(t time.Time) (time.Time, string) { return s.find(t, -1) }

// Next returns the first due time after t; zero when there is none.
func (s Schedule) Next(t time.Time) time.Time {
	d, _ := s.find(t, 1)
	return d
}

// find walks the days back (step -1) to a due time not after t, or on (1) to one after t.
func (s Schedule) find(t time.Time, step int) (time.Time, string) {
	if s.IsZero() {
		return time.Time{}, ""
	}
	local := t.In(s.Location)
	for i := 0; i < lookaround; i++ {
		// time.Date normalises the day: the 0th of a month is the last of the one before.
		day := time.Date(local.Year(), local.Month(), local.Day()+step*i, 12, 0, 0, 0, s.Location)
		if d := s.due(day); s.publishes(day) && d.After(t) == (step > 0) {
			return d, day.Format(dateLayout)
		}
	}
	return time.Time{}, ""
}

// targetClosed reports the TARGET closing days, without ECB rates (docs/exchangerate.md).
func targetClosed(year int, month time.Month, day int) bool {
	switch {
	case month == time.January && day == 1, month == time.May && day == 1,
		month == time.December && (day == 25 || day == 26):
		return true
	}
	easter := easterSunday(year)
	d := time.Date(year, month, day, 0, 0, 0, 0, time.UTC)
	return d.Equal(easter.AddDate(0, 0, -2)) || d.Equal(easter.AddDate(0, 0, 1))
}

// easterSunday is Gregorian Easter Sunday (Meeus, Jones and Butcher), at midnight UTC.
func easterSunday(year int) time.Time {
	a := year % 19
	b, c := year/100, year%100
	d, e := b/4, b%4
	f := (b + 8) / 25
	g := (b - f + 1) / 3
	h := (19*a + b - d - g + 15) % 30
	i, k := c/4, c%4
	l := (32 + 2*e + 2*i - h - k) % 7
	m := (a + 11*h + 22*l) / 451
	month := (h + l - 7*m + 114) / 31
	day := (h+l-7*m+114)%31 + 1
	return time.Date(year, time.Month(month), day, 0, 0, 0, 0, time.UTC)
}

// frankfurtZone is the ECB's zone, CET and CEST.
var frankfurtZone = func() *time.Location {
	loc, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		panic(err) // the database is embedded (time/tzdata)
	}
	return loc
}()

// ecbSchedule is the ECB's: 16:00 Frankfurt time on TARGET working days, asked at 16:10.
func ecbSchedule() Schedule {
	return Schedule{Location: frankfurtZone, Hour: 16, After: 10 * time.Minute, Closed: targetClosed}
}

// frankfurterECBSchedule is when Frankfurter serves the ECB's rates (it imports them every
// 30 minutes, 14:00 to 16:30 UTC): by about 16:35 Frankfurt time, asked at 16:45.
func frankfurterECBSchedule() Schedule {
	return Schedule{Location: frankfurtZone, Hour: 16, After: 45 * time.Minute, Closed: targetClosed}
}

// dueAt is when a table is due: interval after the last check, a publication, or catch-up.
func dueAt(s Snapshot, sch Schedule, interval time.Duration) time.Time {
	if s.Table == nil {
		return time.Time{}
	}
	due := s.CheckedAt.Add(interval) // a zero Schedule has no Next and no Last
	if next := sch.Next(s.CheckedAt); !next.IsZero() && next.Before(due) {
		due = next
	}
	if last, date := sch.Last(s.CheckedAt); !last.IsZero() && s.Table.Date < date && s.CheckedAt.Sub(last) < catchUpWindow {
		if soon := s.CheckedAt.Add(catchUpInterval); soon.Before(due) {
			due = soon
		}
	}
	return due
}
