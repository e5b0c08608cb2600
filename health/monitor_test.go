package health

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

var errDown = errors.New("down")

// scripted is a probe whose nth check returns results[n]; the last result
// repeats.
type scripted struct {
	results []error
	mu      sync.Mutex
	calls   int
	began   []time.Time
	budgets []time.Duration // each check's deadline, from its start
}

func (s *scripted) Check(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	s.began = append(s.began, now)
	if dl, ok := ctx.Deadline(); ok {
		s.budgets = append(s.budgets, dl.Sub(now))
	}
	i := min(s.calls, len(s.results)-1)
	s.calls++
	return s.results[i]
}

func (s *scripted) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// change is one onChange call: the verdict and how many checks had run.
type change struct {
	healthy bool
	after   int
}

func TestMonitorVerdicts(t *testing.T) {
	F := errDown
	tests := []struct {
		name    string
		cfg     Config
		results []error
		want    []change
	}{
		{"healthy on the first success", Config{}, []error{nil}, []change{{true, 1}}},
		{"unhealthy after Failures from the start", Config{}, []error{F}, []change{{false, 3}}},
		{"healthy, then unhealthy after exactly Failures", Config{}, []error{nil, F}, []change{{true, 1}, {false, 4}}},
		{"one failure is enough when Failures is 1", Config{Failures: 1}, []error{nil, F}, []change{{true, 1}, {false, 2}}},
		{"a success resets the count", Config{}, []error{nil, F, F, nil, F, F, nil, F}, []change{{true, 1}, {false, 10}}},
		{"one success recovers", Config{Failures: 2}, []error{F, F, F, nil}, []change{{false, 2}, {true, 4}}},
		{"flapping reports every change", Config{Failures: 1}, []error{nil, F, nil, F, nil}, []change{{true, 1}, {false, 2}, {true, 3}, {false, 4}, {true, 5}}},
		{
			"failures inside StartPeriod do not count",
			Config{StartPeriod: time.Hour},
			[]error{F, F, F, F, F, nil, F, F, F},
			[]change{{true, 6}, {false, 9}}, // after a success the period no longer shelters
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &scripted{results: tt.results}
			cfg := tt.cfg
			cfg.Interval = 2 * time.Millisecond
			var (
				mu  sync.Mutex
				got []change
				mon atomic.Pointer[Monitor]
			)
			m := Start(p, cfg, func(healthy bool, err error) {
				if healthy != (err == nil) {
					t.Errorf("onChange(%v, %v): healthy goes with a nil error only", healthy, err)
				}
				if m := mon.Load(); m != nil { // onChange may ask
					if h, known := m.Healthy(); h != healthy || !known {
						t.Errorf("Healthy() = %v, %v inside onChange(%v)", h, known, healthy)
					}
				}
				mu.Lock()
				got = append(got, change{healthy, p.count()})
				mu.Unlock()
			})
			mon.Store(m)
			// Run well past the script, so a repeated report would show.
			waitFor(t, func() bool { return p.count() >= len(tt.results)+5 })
			m.Stop()
			mu.Lock()
			defer mu.Unlock()
			if !slices.Equal(got, tt.want) {
				t.Fatalf("changes = %v, want %v", got, tt.want)
			}
			last := tt.want[len(tt.want)-1]
			if h, known := m.Healthy(); h != last.healthy || !known {
				t.Fatalf("Healthy() = %v, %v after %v", h, known, got)
			}
		})
	}
}

// TestMonitorStartPeriodEnds: failures count again once the start period
// is over, even without a success.
func TestMonitorStartPeriodEnds(t *testing.T) {
	const period = 150 * time.Millisecond
	began := time.Now()
	unhealthy := make(chan time.Time, 1)
	m := Start(&scripted{results: []error{errDown}}, Config{Interval: 5 * time.Millisecond, Failures: 2, StartPeriod: period},
		func(healthy bool, err error) { unhealthy <- time.Now() })
	defer m.Stop()
	select {
	case at := <-unhealthy:
		if at.Sub(began) < period {
			t.Fatalf("unhealthy after %s, inside the %s start period", at.Sub(began), period)
		}
	case <-time.After(period + time.Second):
		t.Fatal("never unhealthy")
	}
}

func TestMonitorTimeoutAndPacing(t *testing.T) {
	const (
		interval = 20 * time.Millisecond
		timeout  = 300 * time.Millisecond
		slow     = 40 * time.Millisecond
	)
	p := &scripted{results: []error{nil}}
	slowProbe := probeFunc(func(ctx context.Context) error {
		time.Sleep(slow)
		return p.Check(ctx)
	})
	m := Start(slowProbe, Config{Interval: interval, Timeout: timeout}, nil)
	waitFor(t, func() bool { return p.count() >= 4 })
	m.Stop()
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, b := range p.budgets {
		// Measured after the probe's own sleep.
		if b > timeout-slow || b < timeout-slow-50*time.Millisecond {
			t.Errorf("check %d had %s left of its timeout, want about %s", i, b, timeout-slow)
		}
	}
	// The next check waits Interval after the previous one ended: a slow
	// check never causes a burst.
	for i := 1; i < len(p.began); i++ {
		if gap := p.began[i].Sub(p.began[i-1]); gap < slow+interval {
			t.Errorf("checks %d and %d began %s apart, want at least %s", i-1, i, gap, slow+interval)
		}
	}
}

// TestMonitorLateSuccess: a probe that ignores its timeout and answers yes
// too late has failed.
func TestMonitorLateSuccess(t *testing.T) {
	late := probeFunc(func(ctx context.Context) error {
		<-ctx.Done()
		time.Sleep(5 * time.Millisecond)
		return nil
	})
	errs := make(chan error, 1)
	m := Start(late, Config{Interval: time.Millisecond, Timeout: 10 * time.Millisecond, Failures: 2}, func(healthy bool, err error) {
		errs <- err
	})
	defer m.Stop()
	select {
	case err := <-errs:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("onChange error = %v, want a deadline exceeded", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("a late answer was never counted as a failure")
	}
}

// TestMonitorStopWaits: Stop cancels the running check and returns only
// after it ended; the cancelled check is not reported.
func TestMonitorStopWaits(t *testing.T) {
	entered := make(chan struct{})
	var returned atomic.Bool
	blocking := probeFunc(func(ctx context.Context) error {
		close(entered)
		<-ctx.Done()
		time.Sleep(20 * time.Millisecond) // a probe cleaning up after itself
		returned.Store(true)
		return ctx.Err()
	})
	var calls atomic.Int32
	m := Start(blocking, Config{Timeout: time.Hour, Failures: 1}, func(bool, error) { calls.Add(1) })
	<-entered
	began := time.Now()
	m.Stop()
	if took := time.Since(began); took > time.Second {
		t.Fatalf("Stop took %s", took)
	}
	if !returned.Load() {
		t.Fatal("Stop returned before the running check ended")
	}
	if n := calls.Load(); n != 0 {
		t.Fatalf("onChange called %d times for a check cut short by Stop", n)
	}
	if h, known := m.Healthy(); h || known {
		t.Fatalf("Healthy() = %v, %v, want no verdict", h, known)
	}
	m.Stop() // idempotent
}

func TestConfigDefaults(t *testing.T) {
	tests := []struct {
		name string
		in   Config
		want Config
	}{
		{"zero", Config{}, Config{Interval: 2 * time.Second, Timeout: time.Second, Failures: 3}},
		{"negative", Config{Interval: -1, Timeout: -1, Failures: -1, StartPeriod: -1}, Config{Interval: 2 * time.Second, Timeout: time.Second, Failures: 3}},
		{"kept", Config{Interval: time.Minute, Timeout: 5 * time.Second, Failures: 1, StartPeriod: time.Hour}, Config{Interval: time.Minute, Timeout: 5 * time.Second, Failures: 1, StartPeriod: time.Hour}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.in.withDefaults(); got != tt.want {
				t.Fatalf("withDefaults() = %+v, want %+v", got, tt.want)
			}
		})
	}
}

type probeFunc func(ctx context.Context) error

func (f probeFunc) Check(ctx context.Context) error { return f(ctx) }

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in time")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestMonitorRealProbe: a real listener, then its absence.
func TestMonitorRealProbe(t *testing.T) {
	ln := listen(t)
	changes := make(chan error, 4)
	m := Start(TCP(nil, ln.Addr().String()), Config{Interval: 5 * time.Millisecond, Timeout: 200 * time.Millisecond},
		func(healthy bool, err error) { changes <- err })
	defer m.Stop()
	for i, wantUp := range []bool{true, false} {
		select {
		case err := <-changes:
			if (err == nil) != wantUp {
				t.Fatalf("change %d: %v, want healthy=%v", i, err, wantUp)
			}
			if !wantUp && !errors.Is(err, syscall.ECONNREFUSED) {
				t.Fatalf("unhealthy with %v, want ECONNREFUSED", err)
			}
		case <-time.After(2 * time.Second):
			t.Fatalf("change %d never came", i)
		}
		ln.Close()
	}
}

// TestQuickUntilFirstPass: a program that starts listening a moment after
// its first check is seen healthy a moment later, not an Interval later,
// and the quick checks before that count as one failure per Interval.
func TestQuickUntilFirstPass(t *testing.T) {
	up := time.Now().Add(300 * time.Millisecond)
	var verdicts []bool
	var mu sync.Mutex
	m := Start(probeFunc(func(context.Context) error {
		if time.Now().Before(up) {
			return errDown
		}
		return nil
	}), Config{Interval: time.Hour, Timeout: time.Second, Failures: 2}, func(healthy bool, err error) {
		mu.Lock()
		verdicts = append(verdicts, healthy)
		mu.Unlock()
	})
	defer m.Stop()
	waitFor(t, func() bool { h, known := m.Healthy(); return known && h })
	if late := time.Since(up); late > time.Second {
		t.Errorf("healthy %s after the program was up, with a one-hour interval", late)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(verdicts) != 1 || !verdicts[0] {
		t.Errorf("verdicts %v: the quick failures before the first pass judged it unhealthy", verdicts)
	}
}
