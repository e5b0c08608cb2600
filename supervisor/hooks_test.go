package supervisor

import (
	"context"
	"errors"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/flyd-dev/flyd/health"
	"github.com/flyd-dev/flyd/runhook"
	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/status"
)

// stepHook notes what the runner asks of it in calls.
type stepHook struct {
	name  string
	fail  error
	calls *[]string
}

func (h stepHook) note(what string) { *h.calls = append(*h.calls, what+" "+h.name) }

func (h stepHook) Name() string { return h.name }
func (h stepHook) Prestart(context.Context, *runhook.Run) error {
	h.note("prestart")
	return h.fail
}
func (h stepHook) Adopt(context.Context, *runhook.Run)     { h.note("adopt") }
func (h stepHook) Poststart(context.Context, *runhook.Run) { h.note("poststart") }
func (h stepHook) Exited(context.Context, *runhook.Run)    { h.note("exited") }
func (h stepHook) Destroy(context.Context, string)         { h.note("destroy") }

func TestRunHooksReleaseInReverse(t *testing.T) {
	refused := errors.New("refused")
	for _, tc := range []struct {
		name  string
		fail  string // the hook whose Prestart fails
		run   func(w *workload)
		calls []string
	}{
		{
			name: "a run that starts and ends",
			run: func(w *workload) {
				if err := w.prestart(w.newRun()); err != nil {
					t.Fatal(err)
				}
				w.release()
				w.release() // once only
			},
			calls: []string{"prestart net", "prestart cgroup", "prestart logs", "exited logs", "exited cgroup", "exited net"},
		},
		{
			name: "a hook that fails releases those before it",
			fail: "logs",
			run: func(w *workload) {
				if err := w.prestart(w.newRun()); !errors.Is(err, refused) {
					t.Fatalf("prestart: %v, want %v", err, refused)
				}
				if w.run != nil {
					t.Fatal("a run that did not start is kept")
				}
				w.release()
			},
			calls: []string{"prestart net", "prestart cgroup", "prestart logs", "exited cgroup", "exited net"},
		},
		{
			name: "an adopted run, and the workload removed",
			run: func(w *workload) {
				w.adopt(w.newRun())
				w.release()
				w.s.hooks.Destroy(context.Background(), w.name)
			},
			calls: []string{"adopt net", "adopt cgroup", "adopt logs", "exited logs", "exited cgroup", "exited net",
				"destroy logs", "destroy cgroup", "destroy net"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls []string
			s := &Supervisor{ctx: context.Background()}
			for _, n := range []string{"net", "cgroup", "logs"} {
				h := stepHook{name: n, calls: &calls}
				if n == tc.fail {
					h.fail = refused
				}
				s.hooks = append(s.hooks, h)
			}
			w := &workload{s: s, name: "w", spec: &spec.Workload{Name: "w"}, health: health.NewHook(health.HookConfig{})}
			tc.run(w)
			if !slices.Equal(calls, tc.calls) {
				t.Fatalf("calls:\n%q\nwant\n%q", calls, tc.calls)
			}
		})
	}
}

// TestStartThatFailsReleases: a run its runtime does not start leaves
// nothing its hooks acquired (a notify socket bound for it); the next
// start acquires anew.
func TestStartThatFailsReleases(t *testing.T) {
	d := newFakeDriver()
	d.failStarts = 1
	s := openFake(t, d)
	defer shut(s)
	sp := fakeSpec("tells", "run")
	sp.Health = &spec.Health{Notify: true}
	sp.Restart.Backoff.Initial.Duration, sp.Restart.Backoff.Max.Duration = time.Hour, time.Hour
	if _, err := s.Apply(t.Context(), sp, ApplyOptions{Start: true}); err != nil {
		t.Fatal(err)
	}
	waitState(t, s, "tells", status.Backoff)
	if _, err := os.Stat(health.NotifyPath(s.notifyDir, "tells")); !os.IsNotExist(err) {
		t.Errorf("the notify socket of a run that did not start is kept: %v", err)
	}
	if _, err := s.Restart(t.Context(), "tells"); err != nil {
		t.Fatal(err)
	}
	waitState(t, s, "tells", status.Running)
	if _, err := os.Stat(health.NotifyPath(s.notifyDir, "tells")); err != nil {
		t.Errorf("the run's notify socket: %v", err)
	}
}
