package chaosagent

import (
	"cmp"
	"fmt"
	"slices"
	"time"
	// Every IANA zone, whatever the manager's image holds: the API server accepts any zone
	// its own database knows, and the manager must know it too.
	_ "time/tzdata"

	blackadderv1beta1 "github.com/quartet-operator/quartet/api/blackadder/v1beta1"
)

// scheduleHorizon is how far ahead the next change of a schedule is looked for: two years
// and a margin, so 366 excluded dates cannot hide the next window.
const scheduleHorizon = 800 * 24 * time.Hour

const minutesPerDay = 24 * 60

// schedule is spec.schedule, parsed; the zero value (no spec.schedule) is always open.
// Without windows it is open all day, every day but the excluded dates (YYYY-MM-DD).
// boundaries are the minutes of the day at which open may change: midnight and every
// window's start and end, sorted, without repeats.
type schedule struct {
	set        bool
	loc        *time.Location
	windows    []window
	excluded   map[string]bool
	boundaries []int
}

// window is one TimeWindow in minutes of the day. end <= start crosses midnight.
type window struct {
	days       [7]bool // by time.Weekday
	start, end int
}

// weekdays maps the API's abbreviations to time.Weekday.
var weekdays = map[blackadderv1beta1.Weekday]time.Weekday{
	"Sun": time.Sunday, "Mon": time.Monday, "Tue": time.Tuesday, "Wed": time.Wednesday,
	"Thu": time.Thursday, "Fri": time.Friday, "Sat": time.Saturday,
}

// parseSchedule parses spec.schedule; an error (the CRD refuses them today) names the field.
func parseSchedule(in *blackadderv1beta1.ChaosSchedule) (schedule, error) {
	if in == nil {
		return schedule{}, nil
	}
	s := schedule{set: true, loc: time.UTC, excluded: map[string]bool{}}
	if in.TimeZone != "" && in.TimeZone != "UTC" {
		if in.TimeZone == "Local" {
			return s, fmt.Errorf("spec.schedule.timeZone: Local is not an IANA time zone name")
		}
		loc, err := time.LoadLocation(in.TimeZone)
		if err != nil {
			return s, fmt.Errorf("spec.schedule.timeZone: %q is not an IANA time zone name", in.TimeZone)
		}
		s.loc = loc
	}
	s.boundaries = []int{0}
	for i, w := range in.Windows {
		start, err := clockMinutes(w.Start, false)
		if err != nil {
			return s, fmt.Errorf("spec.schedule.windows[%d].start: %w", i, err)
		}
		end, err := clockMinutes(w.End, true)
		if err != nil {
			return s, fmt.Errorf("spec.schedule.windows[%d].end: %w", i, err)
		}
		if start == end {
			return s, fmt.Errorf("spec.schedule.windows[%d]: start and end are both %s", i, w.Start)
		}
		pw := window{start: start, end: end}
		for _, d := range w.Days {
			wd, ok := weekdays[d]
			if !ok {
				return s, fmt.Errorf("spec.schedule.windows[%d].days: %q is not one of Mon, Tue, Wed, Thu, Fri, Sat, Sun", i, d)
			}
			pw.days[wd] = true
		}
		if len(w.Days) == 0 {
			pw.days = [7]bool{true, true, true, true, true, true, true}
		}
		s.windows = append(s.windows, pw)
		s.boundaries = append(s.boundaries, start, end%minutesPerDay)
	}
	slices.Sort(s.boundaries)
	s.boundaries = slices.Compact(s.boundaries)
	for i, d := range in.ExcludedDates {
		t, err := time.Parse(time.DateOnly, string(d))
		if err != nil {
			return s, fmt.Errorf("spec.schedule.excludedDates[%d]: %q is not a date as YYYY-MM-DD", i, d)
		}
		s.excluded[t.Format(time.DateOnly)] = true
	}
	return s, nil
}

// clockMinutes parses HH:MM into minutes since midnight; 24:00 only when allowed.
func clockMinutes(hhmm string, allow24 bool) (int, error) {
	t, err := time.Parse("15:04", hhmm)
	switch {
	case hhmm == "24:00" && allow24:
		return minutesPerDay, nil
	case err != nil || len(hhmm) != 5:
		return 0, fmt.Errorf("%q is not a time as HH:MM", hhmm)
	}
	return t.Hour()*60 + t.Minute(), nil
}

// open reports whether rounds may run at t: its date in the schedule's zone is not excluded and
// its wall-clock time is in a (half-open) window that opened on its weekday or, across
// midnight, the day before.
func (s schedule) open(t time.Time) bool {
	if !s.set {
		return true
	}
	local := t.In(s.loc)
	if s.excluded[local.Format(time.DateOnly)] {
		return false
	}
	if len(s.windows) == 0 {
		return true
	}
	minute := local.Hour()*60 + local.Minute()
	today := local.Weekday()
	yesterday := (today + 6) % 7
	for _, w := range s.windows {
		if w.start < w.end {
			if w.days[today] && minute >= w.start && minute < w.end {
				return true
			}
			continue
		}
		// Crosses midnight: from start to 24:00 on its day, from 00:00 to end the next.
		if w.days[today] && minute >= w.start || w.days[yesterday] && minute < w.end {
			return true
		}
	}
	return false
}

// nextChange returns the first instant after from at which open(t) differs from
// open(from), within scheduleHorizon; ok is false when there is none (no schedule, or a
// schedule that never changes).
//
// open depends only on the wall-clock date and minute, which change continuously except
// when the zone's offset changes (daylight saving). Within one offset the instants where a
// boundary minute falls are exact (wall time minus offset), so a wall time that a spring
// change skips yields no instant and one that an autumn change repeats yields two; the
// offset change itself is a candidate too, as the wall clock jumps there.
func (s schedule) nextChange(from time.Time) (time.Time, bool) {
	if !s.set {
		return time.Time{}, false
	}
	state := s.open(from)
	limit := from.Add(scheduleHorizon)
	for t := from; t.Before(limit); {
		local := t.In(s.loc)
		_, offset := local.Zone()
		_, periodEnd := local.ZoneBounds()
		if periodEnd.IsZero() || periodEnd.After(limit) {
			periodEnd = limit
		}
		y, m, d := local.Date()
		for day := 0; ; day++ {
			midnight := time.Date(y, m, d+day, 0, 0, 0, 0, time.UTC).Add(-time.Duration(offset) * time.Second)
			if !midnight.Before(periodEnd) {
				break
			}
			for _, b := range s.boundaries {
				at := midnight.Add(time.Duration(b) * time.Minute)
				if !at.After(t) {
					continue
				}
				if !at.Before(periodEnd) {
					break
				}
				if s.open(at) != state {
					return at, true
				}
			}
		}
		if periodEnd.Before(limit) && s.open(periodEnd) != state {
			return periodEnd, true
		}
		t = periodEnd
	}
	return time.Time{}, false
}

// windowState is where an agent stands against its schedule at one instant: whether it has
// one, whether rounds may run, when that changes next (nil: not within scheduleHorizon, or no
// schedule), and the zone messages use.
type windowState struct {
	Scheduled, Open bool
	Change          *time.Time
	Zone            *time.Location
}

func windowAt(s schedule, now time.Time) windowState {
	w := windowState{Scheduled: s.set, Open: s.open(now), Zone: s.loc}
	if next, ok := s.nextChange(now); ok {
		w.Change = &next
	}
	return w
}

// describe formats t in the schedule's zone: RFC 3339, then the weekday and zone name.
func (w windowState) describe(t time.Time) string {
	loc := cmp.Or(w.Zone, time.UTC)
	local := t.In(loc)
	return fmt.Sprintf("%s (%s %s)", local.Format(time.RFC3339), local.Format("Mon 15:04"), loc.String())
}
