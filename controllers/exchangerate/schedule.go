package exchangerate

import (
	"time"
	// The publication times are in the publisher's zone (Europe/Berlin for the ECB); the
	// embedded database keeps them right whatever the image carries.
	_ "time/tzdata"
)

// Schedule says when a source publishes: on its working days, at a local time of day. The
// rates are asked for After that, when the source serves them. The zero Schedule knows no
// publication time (Frankfurter's blend of about 100 central banks changes throughout the
// day): only the periodic refresh applies.
type Schedule struct {
	// Location is the zone of the publication time, daylight saving time included.
	Location *time.Location
	// Hour and Minute are the local time of publication.
	Hour, Minute int
	// After is how long after the publication the source is asked: the publisher's own
	// slack and, for a service that imports the publication, its import.
	After time.Duration
	// Closed reports the weekdays without publication (holidays); Saturdays and Sundays
	// never publish.
	Closed func(year int, month time.Month, day int) bool
}

// lookaround bounds the search for a publishing day: the longest pause of the TARGET
// calendar is four days (Good Friday to Easter Monday), of any sane calendar far less than
// this.
const lookaround = 15

// catchUpInterval and catchUpWindow shape the polling for a publication that is due but not
// there yet (the ECB is late, a mirror has not imported it): every catchUpInterval, for
// catchUpWindow after the due time. A publication still missing after that is taken for a
// day off the calendar does not know; the periodic refresh and the next publication take
// over.
const (
	catchUpInterval = 15 * time.Minute
	catchUpWindow   = 3 * time.Hour
)

// IsZero reports whether s knows no publication time.
func (s Schedule) IsZero() bool { return s.Location == nil }

// publishes reports whether s publishes on the local day y-m-d.
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

// Last returns the latest due time (publication plus After) not after t, and the date of
// that publication (YYYY-MM-DD, the publisher's local date, which is what the source puts
// in its table). Zero and "" for the zero Schedule or when none is found.
func (s Schedule) Last(t time.Time) (time.Time, string) {
	if s.IsZero() {
		return time.Time{}, ""
	}
	local := t.In(s.Location)
	for i := 0; i < lookaround; i++ {
		// time.Date normalises the day: the 0th of a month is the last of the one before.
		day := time.Date(local.Year(), local.Month(), local.Day()-i, 12, 0, 0, 0, s.Location)
		if d := s.due(day); s.publishes(day) && !d.After(t) {
			return d, day.Format(dateLayout)
		}
	}
	return time.Time{}, ""
}

// Next returns the first due time after t; zero for the zero Schedule.
func (s Schedule) Next(t time.Time) time.Time {
	if s.IsZero() {
		return time.Time{}
	}
	local := t.In(s.Location)
	for i := 0; i < lookaround; i++ {
		day := time.Date(local.Year(), local.Month(), local.Day()+i, 12, 0, 0, 0, s.Location)
		if d := s.due(day); s.publishes(day) && d.After(t) {
			return d
		}
	}
	return time.Time{}
}

// targetClosed reports the TARGET closing days, on which the ECB publishes no reference
// rates: New Year's Day, Good Friday, Easter Monday, Labour Day (1 May), 25 and 26 December.
// Source: the ECB's page on the euro foreign exchange reference rates,
// https://www.ecb.europa.eu/stats/policy_and_exchange_rates/euro_reference_exchange_rates/html/index.en.html
// ("usually updated at around 16:00 CET every working day, except on TARGET closing days").
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

// easterSunday is the date of Easter Sunday of the Gregorian calendar (the anonymous
// algorithm of Meeus, Jones and Butcher), at midnight UTC.
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
var frankfurtZone = mustLoadLocation("Europe/Berlin")

func mustLoadLocation(name string) *time.Location {
	loc, err := time.LoadLocation(name)
	if err != nil {
		panic(err) // the database is embedded (time/tzdata)
	}
	return loc
}

// ecbSchedule is the ECB's: around 16:00 CET (CEST in summer) on TARGET working days. The
// rates are asked for ten minutes later.
func ecbSchedule() Schedule {
	return Schedule{Location: frankfurtZone, Hour: 16, After: 10 * time.Minute, Closed: targetClosed}
}

// frankfurterECBSchedule is when Frankfurter serves the ECB's publication: it imports the
// ECB's rates every 30 minutes from 14:00 to 16:30 UTC on weekdays (db/seeds/providers/ecb.json,
// publish_schedule "*/30 14-16 * * 1-5", in lineofflight/frankfurter) and debounces its CDN
// purges to five minutes (CHANGELOG, #568): the publication of 16:00 CET (15:00 UTC in
// winter) is served by about 15:35 UTC. Asked for 45 minutes after the ECB's time.
func frankfurterECBSchedule() Schedule {
	return Schedule{Location: frankfurtZone, Hour: 16, After: 45 * time.Minute, Closed: targetClosed}
}

// dueAt is when a source's table is next due for a fetch, absent failures: after interval
// since the last check; at the first publication after the last check; and, while a
// publication is due but not in the table yet, every catchUpInterval for catchUpWindow.
// The zero time means now: there is no table yet.
func dueAt(s Snapshot, sch Schedule, interval time.Duration) time.Time {
	if s.Table == nil {
		return time.Time{}
	}
	due := s.CheckedAt.Add(interval)
	if sch.IsZero() {
		return due
	}
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
