package spec

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// TestParseSchedule: what the parser takes, and each refusal saying why.
func TestParseSchedule(t *testing.T) {
	at := time.Date(2026, 3, 10, 10, 2, 30, 0, time.UTC)
	tests := []struct {
		sched string
		next  time.Time // after at, in UTC
		err   string
	}{
		{"*/5 * * * *", time.Date(2026, 3, 10, 10, 5, 0, 0, time.UTC), ""},
		{"0 3 * * mon", time.Date(2026, 3, 16, 3, 0, 0, 0, time.UTC), ""},
		{"@hourly", time.Date(2026, 3, 10, 11, 0, 0, 0, time.UTC), ""},
		{"@daily", time.Date(2026, 3, 11, 0, 0, 0, 0, time.UTC), ""},
		{"@every 10m", at.Add(10 * time.Minute), ""},
		{"@every 1s", at.Add(time.Second), ""},
		{"CRON_TZ=UTC 0 12 * * *", time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC), ""},
		{"TZ=Asia/Tokyo 0 12 * * *", time.Date(2026, 3, 11, 3, 0, 0, 0, time.UTC), ""},
		{"* * *", time.Time{}, "expected exactly 5 fields, found 3"},
		{"* * * * * *", time.Time{}, "expected exactly 5 fields, found 6"},
		{"61 * * * *", time.Time{}, "above maximum"},
		{"@fortnightly", time.Time{}, "unrecognized descriptor"},
		{"@every 500ms", time.Time{}, "at least 1s"},
		{"@every 1.5s", time.Time{}, "whole seconds"},
		{"@every soon", time.Time{}, "takes a duration"},
		{"CRON_TZ=UTC", time.Time{}, "is followed by a space"},
		{"CRON_TZ= * * * * *", time.Time{}, "names no time zone"},
		{"TZ=Mars/Olympus * * * * *", time.Time{}, "bad location"},
		{"0 0 30 2 *", time.Time{}, "names no time"},
		{"", time.Time{}, "empty spec"},
		{strings.Repeat("1,", 200) + "1 * * * *", time.Time{}, "at most 256"},
	}
	for _, tt := range tests {
		t.Run(tt.sched, func(t *testing.T) {
			s, err := ParseSchedule(tt.sched)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want one saying %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := s.Next(at); !got.Equal(tt.next) {
				t.Errorf("Next(%s) = %s, want %s", at, got.UTC(), tt.next)
			}
		})
	}
}

// TestParseScheduleNeverPanics: whatever it is given, the parser answers.
func TestParseScheduleNeverPanics(t *testing.T) {
	parts := []string{"*", "/", "-", ",", "0", "7", "60", "99999999999", " ", "@", "@every", "TZ=", "CRON_TZ=UTC", "?", "L", "jan", "mon", "-1", "\t"}
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		var b strings.Builder
		for range 1 + r.IntN(12) {
			b.WriteString(parts[r.IntN(len(parts))])
		}
		_, _ = ParseSchedule(b.String())
	}
}

// TestValidateSchedule: a schedule that does not parse, and one on a
// workload that is never at rest or runs nothing, are refused naming
// the field.
func TestValidateSchedule(t *testing.T) {
	w := valid()
	w.Schedule = "*/5 * * * *"
	if err := w.Validate(); err != nil {
		t.Fatalf("on-failure with a schedule: %v", err)
	}
	w.Restart.Policy = RestartNever
	if err := w.Validate(); err != nil {
		t.Fatalf("never with a schedule: %v", err)
	}
	w.Schedule = "*/5 * *"
	err := w.Validate()
	wantFieldError(t, err, []string{"schedule"})
	if !strings.Contains(err.Error(), "does not parse: expected exactly 5 fields") {
		t.Errorf("error %q does not give the parser's reason", err)
	}
	w.Schedule, w.Restart.Policy = "@hourly", RestartAlways
	err = w.Validate()
	wantFieldError(t, err, []string{"schedule"})
	if !strings.Contains(err.Error(), "policy: always") {
		t.Errorf("error %q does not say why", err)
	}
	src := minimal + "schedule: \"@every 30s\"\nrestart: {policy: never}\n"
	p, err := Parse([]byte(src))
	if err != nil || len(p) != 1 || p[0].Schedule != "@every 30s" {
		t.Fatalf("Parse = %+v, %v", p, err)
	}
}
