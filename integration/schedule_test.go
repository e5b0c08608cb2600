package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flyd-dev/flyd/api"
)

// TestSchedule: a one-shot on `@every 1s` is armed by its apply and runs
// at its times; a run longer than the period is never joined by another
// (the times it spans are skipped, saying so); stop disarms it. A time
// that passes while the daemon is killed (-9) is run once by the next
// daemon, however many passed. A schedule that does not parse, or one on
// a workload restarted always, is refused naming the field.
func TestSchedule(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	runs := filepath.Join(d.dir, "runs")
	// Each run says when it starts and ends, in nanoseconds.
	out := d.mustCLI(t, "apply", "-f", d.writeSpec(t, "tick.yaml", fmt.Sprintf(`
name: tick
command: ["/bin/sh", "-c", "echo start $(date +%%s%%N) >> %[1]s; sleep 1.5; echo end $(date +%%s%%N) >> %[1]s"]
schedule: "@every 1s"
restart: {policy: never}
`, runs)))
	if strings.TrimSpace(out) != "tick scheduled" {
		t.Errorf("apply said %q, want tick scheduled", out)
	}

	// Two runs end: each began after the one before had ended.
	eventually(t, "two runs of tick", func() error {
		if n := strings.Count(readFile(t, runs), "end "); n < 2 {
			return fmt.Errorf("%d runs ended", n)
		}
		return nil
	})
	d.mustCLI(t, "stop", "tick")
	text := readFile(t, runs)
	for i, line := range strings.Split(strings.TrimSpace(text), "\n") {
		// Two runs at once would write two starts in a row.
		word, _, _ := strings.Cut(line, " ")
		want := "start"
		if i%2 == 1 {
			want = "end"
		}
		if word != want {
			t.Fatalf("runs overlap: line %d is %q, want %s:\n%s", i+1, line, want, text)
		}
	}
	skipped := d.pastEvent(t, func(e api.Event) bool {
		return e.Workload == "tick" && e.Type == api.EventSchedule && strings.HasPrefix(e.Message, "skipped the run of ")
	})
	if !strings.HasSuffix(skipped.Message, "still running") {
		t.Errorf("skip event %q", skipped.Message)
	}
	d.pastEvent(t, func(e api.Event) bool {
		return e.Workload == "tick" && e.Type == api.EventSchedule && strings.HasSuffix(e.Message, "started by its schedule")
	})
	if w := d.inspect(t, "tick"); w.State != api.StateStopped || w.NextStart != nil {
		t.Errorf("stopped: %s, next %v; want stopped, no next start", w.State, w.NextStart)
	}
	time.Sleep(1500 * time.Millisecond)
	if now := readFile(t, runs); now != text {
		t.Fatalf("a stopped schedule ran:\n%s", now)
	}

	// Missed while no daemon ran: two times of @every 4s pass with the
	// daemon killed; the next runs one.
	missed := filepath.Join(d.dir, "missed")
	if out := d.mustCLI(t, "apply", "-f", d.writeSpec(t, "missed.yaml", fmt.Sprintf(`
name: nightly
command: ["/bin/sh", "-c", "echo ran >> %s"]
schedule: "@every 4s"
restart: {policy: never}
`, missed))); strings.TrimSpace(out) != "nightly scheduled" {
		t.Errorf("apply said %q, want nightly scheduled", out)
	}
	d.kill(t) // its first time is 3 to 4 s away
	time.Sleep(9 * time.Second)
	if _, err := os.Stat(missed); err == nil {
		t.Fatal("nightly ran with no daemon")
	}
	d2 := startDaemon(t, inDir(d.dir))
	w := d2.waitWorkload(t, "nightly", "its missed run done", func(w *api.Workload) bool {
		return w.State == api.StateScheduled && w.LastExit != nil
	})
	if got := readFile(t, missed); got != "ran\n" || w.NextStart == nil || !time.Now().Before(*w.NextStart) {
		t.Errorf("after the missed times: runs %q, next %v; want one run, the next to come", got, w.NextStart)
	}
	if ps := d2.mustCLI(t, "ps"); !strings.Contains(ps, "scheduled (next ") {
		t.Errorf("ps does not show the next run:\n%s", ps)
	}
	ev := d2.pastEvent(t, func(e api.Event) bool { return e.Workload == "nightly" && e.Type == api.EventSchedule })
	if !strings.Contains(ev.Message, "missed while no daemon ran, started now") {
		t.Errorf("event %q, want one saying the run was missed", ev.Message)
	}
	if st := d2.get(t, "tick").State; st != api.StateStopped {
		t.Errorf("tick, stopped, came back %s", st)
	}

	// Refused, naming the field and why.
	for spec, want := range map[string]string{
		"schedule: \"*/5 * *\"\n":                            "schedule: does not parse: expected exactly 5 fields",
		"schedule: \"@hourly\"\nrestart: {policy: always}\n": "schedule: starts a one-shot at its times, and restart: {policy: always}",
	} {
		file := d2.writeSpec(t, "bad.yaml", "name: bad\ncommand: [/bin/true]\n"+spec)
		if _, errOut, code := runCLI(t, d2.socket, "apply", "-f", file); code != 1 || !strings.Contains(errOut, want) {
			t.Errorf("apply of %q: exit %d, stderr %q; want 1, %q", spec, code, errOut, want)
		}
	}
	d2.mustCLI(t, "rm", "tick", "nightly")
}

// pastEvent is the first event of the daemon's history, or after it, that
// ok accepts.
func (d *daemon) pastEvent(t *testing.T, ok func(api.Event) bool) api.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitFor)
	defer cancel()
	ch, err := d.client.Events(ctx, 1) // the history from its first
	if err != nil {
		t.Fatal(err)
	}
	for ev := range ch {
		if ok(ev) {
			return ev
		}
	}
	t.Fatalf("no such event within %s", waitFor)
	return api.Event{}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(b)
}
