package spec

import (
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// MaxScheduleLength bounds a schedule: the longest useful one (a zone's
// name and five lists) is well under it.
const MaxScheduleLength = 256

// scheduleParser reads crontab's five fields (minute, hour, day of month,
// month, day of week: "*/5 * * * *") and the descriptors @yearly
// (@annually), @monthly, @weekly, @daily (@midnight), @hourly and
// @every DURATION; a CRON_TZ= or TZ= prefix names a time zone
// ("CRON_TZ=Europe/Paris 0 3 * * *"). Without one a schedule is in the
// daemon's time zone (time.Local: TZ, else /etc/localtime). No seconds
// field: @every is for periods under a minute.
var scheduleParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// ParseSchedule reads a schedule. Its Next(t) is the first time after t
// the schedule names, in t's zone unless the schedule names one.
func ParseSchedule(s string) (sched cron.Schedule, err error) {
	if len(s) > MaxScheduleLength {
		return nil, fmt.Errorf("is %d bytes long; a schedule is at most %d", len(s), MaxScheduleLength)
	}
	body := s
	if strings.HasPrefix(s, "TZ=") || strings.HasPrefix(s, "CRON_TZ=") {
		// The parser cuts the zone at the first space, and fails on a
		// prefix with none.
		zone, rest, ok := strings.Cut(s, " ")
		if !ok || strings.TrimSpace(rest) == "" {
			return nil, fmt.Errorf("%s is followed by a space and the schedule", zone)
		}
		if strings.HasSuffix(zone, "=") {
			return nil, fmt.Errorf("%s names no time zone", zone)
		}
		body = strings.TrimSpace(rest)
	}
	if d, ok := strings.CutPrefix(body, "@every "); ok {
		// The parser takes less than a second as a second and drops a
		// fraction of one: refused rather than changed.
		p, err := time.ParseDuration(strings.TrimSpace(d))
		if err != nil {
			return nil, fmt.Errorf("@every takes a duration (10s, 5m, 1h30m): %v", err)
		}
		if p < time.Second || p%time.Second != 0 {
			return nil, fmt.Errorf("@every takes whole seconds, at least 1s; got %s", p)
		}
	}
	defer func() {
		// A parser's slip must not take the daemon down with it.
		if r := recover(); r != nil {
			sched, err = nil, fmt.Errorf("cannot be read (%v)", r)
		}
	}()
	sched, err = scheduleParser.Parse(s)
	if err != nil {
		return nil, err
	}
	if sched.Next(time.Now()).IsZero() {
		// February 30th: the parser looks five years ahead.
		return nil, fmt.Errorf("names no time in the next five years")
	}
	return sched, nil
}

func (w *Workload) validateSchedule(p *problems) {
	if w.Schedule == "" {
		return
	}
	if _, err := ParseSchedule(w.Schedule); err != nil {
		p.add("schedule", "does not parse: %v (five fields, minute hour day-of-month month day-of-week, or @hourly, @daily, @every 10m…)", err)
	}
	switch {
	case w.runtime().RunsNothing:
		p.add("schedule", "kind external runs nothing, so it takes no schedule")
	case w.Restart.Policy == RestartAlways:
		p.add("schedule", "starts a one-shot at its times, and restart: {policy: always} restarts its run whenever it ends, so it would never be at rest for the schedule to start: use policy never or on-failure")
	}
}
