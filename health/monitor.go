package health

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Config is how a Monitor runs its probe. Zero fields take the defaults.
type Config struct {
	Interval, Timeout time.Duration // defaults 2s, 1s
	Failures          int           // consecutive failures before unhealthy; default 3
	StartPeriod       time.Duration // failures during it do not count
}

const (
	defaultInterval = 2 * time.Second
	defaultTimeout  = time.Second
	defaultFailures = 3
)

func (c Config) withDefaults() Config {
	if c.Interval <= 0 {
		c.Interval = defaultInterval
	}
	if c.Timeout <= 0 {
		c.Timeout = defaultTimeout
	}
	if c.Failures <= 0 {
		c.Failures = defaultFailures
	}
	c.StartPeriod = max(c.StartPeriod, 0)
	return c
}

// Monitor checks a probe on a schedule until stopped. The first verdict:
// healthy on the first success; unhealthy after Failures consecutive
// failures (failures inside StartPeriod don't count, until a check has
// passed: a workload that answered once has started, and then every
// failure is news). After that, every change is reported.
//
// The first check runs at once, since dependants wait for the first
// success, and until one passes the next come quickly (from 50 ms,
// doubling up to Interval), so a program that starts listening a moment
// later is seen healthy a moment later, not a whole Interval later; those
// quick checks count as one failure per Interval, so they judge no sooner
// than the schedule would. Once one has passed, each next check runs
// Interval after the previous one ended, so a slow check delays the
// schedule instead of causing a burst.
type Monitor struct {
	probe    Probe
	cfg      Config
	onChange func(healthy bool, err error)

	cancel context.CancelFunc
	done   chan struct{}

	// mu guards healthy and known; onChange runs without it.
	mu      sync.Mutex
	healthy bool
	known   bool
}

// Start runs p under cfg on a goroutine of its own. onChange (may be nil)
// is called from that goroutine, in order, never concurrently, with the
// failing check's error when it turns unhealthy; it must not block for
// long and must not call Stop.
func Start(p Probe, cfg Config, onChange func(healthy bool, err error)) *Monitor {
	if p == nil {
		panic("health: Start with a nil Probe") // here, not in the goroutine
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &Monitor{
		probe:    p,
		cfg:      cfg.withDefaults(),
		onChange: onChange,
		cancel:   cancel,
		done:     make(chan struct{}),
	}
	go m.run(ctx)
	return m
}

// Stop stops the monitor and waits for its goroutine, and any check it is
// running (whose context it cancels), to end. No onChange call happens
// after it returns. It may be called more than once.
func (m *Monitor) Stop() {
	m.cancel()
	<-m.done
}

// Healthy is the latest verdict; known is false until the first one.
func (m *Monitor) Healthy() (healthy, known bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.healthy, m.known
}

func (m *Monitor) run(ctx context.Context) {
	defer close(m.done)
	graceEnds := time.Now().Add(m.cfg.StartPeriod)
	passed := false // a check has passed: the start period no longer applies
	fails := 0
	var counted time.Time // when a failure before the first pass last counted
	quick := firstRetry
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		began := time.Now()
		err := m.check(ctx)
		if ctx.Err() != nil {
			return // stopped mid-check: its failure says nothing about the workload
		}
		switch {
		case err == nil:
			passed, fails = true, 0
			m.report(true, nil)
		case !passed && began.Before(graceEnds):
		case !passed && !counted.IsZero() && began.Sub(counted) < m.cfg.Interval:
			// A quick retry: the failure of this Interval is counted.
		default:
			if !passed {
				counted = began
			}
			fails++
			if fails >= m.cfg.Failures {
				m.report(false, err)
			}
		}
		next := m.cfg.Interval
		if !passed {
			next, quick = min(quick, m.cfg.Interval), 2*quick
		}
		timer.Reset(next)
	}
}

// firstRetry is the wait before the second check, when the first failed.
const firstRetry = 50 * time.Millisecond

// check runs the probe once under the timeout. An answer that came after
// the timeout is a failure even if the probe ignored its context and said
// yes: by the user's own measure, the workload was too slow.
func (m *Monitor) check(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.Timeout)
	defer cancel()
	err := m.probe.Check(ctx)
	if err == nil && ctx.Err() != nil {
		err = fmt.Errorf("check took longer than %s: %w", m.cfg.Timeout, ctx.Err())
	}
	return err
}

// report records a verdict and tells onChange only when it changed.
// onChange runs outside the lock, so it may call Healthy.
func (m *Monitor) report(healthy bool, err error) {
	m.mu.Lock()
	changed := !m.known || m.healthy != healthy
	m.healthy, m.known = healthy, true
	m.mu.Unlock()
	if changed && m.onChange != nil {
		m.onChange(healthy, err)
	}
}
