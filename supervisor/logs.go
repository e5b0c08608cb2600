package supervisor

import (
	"os"
	"time"

	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/logfile"
)

// Log rotation looks at a log every second while it grows, and backs off
// to every maxLogCheck while it does not: with hundreds of quiet
// workloads, a stat of each every second was most of an idle daemon's
// CPU. A new run is watched every second again from its start, so a
// burst after a quiet spell can outgrow the limit by at most what it
// writes in maxLogCheck.
const (
	minLogCheck = time.Second
	maxLogCheck = 8 * time.Second
)

// logCheck is one log's schedule.
type logCheck struct {
	next  time.Time
	every time.Duration
	size  int64
}

// everyWorkload calls check for every workload, every so often, until the
// supervisor closes: a loop of the supervisor's own (s.wg counts it).
func (s *Supervisor) everyWorkload(every time.Duration, check func(*workload, time.Time)) {
	defer s.wg.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case now := <-t.C:
			for _, w := range s.unsorted() {
				check(w, now)
			}
		}
	}
}

// checkLog rotates w's log if it is due and over the size limit, and
// schedules the next look.
func (s *Supervisor) checkLog(w *workload, now time.Time) {
	c := &w.logs
	if w.newRun.Swap(false) {
		c.next, c.every = time.Time{}, 0
	}
	if now.Before(c.next) {
		return
	}
	path := s.logPath(w.name)
	var size int64
	if fi, err := os.Stat(path); err == nil {
		size = fi.Size()
	}
	if size >= s.cfg.LogMaxSize {
		if _, err := logfile.RotateHeld(path, s.cfg.LogMaxSize, s.cfg.LogGenerations, s.holdWriters(w.name)); err != nil {
			w.log.Warn("log rotation failed", zap.Error(err))
		}
	}
	if size == c.size && c.every > 0 {
		c.every = min(2*c.every, maxLogCheck)
	} else {
		c.every = minLogCheck
	}
	// Half a tick early, so that the tick at that time is not missed.
	c.size, c.next = size, now.Add(c.every-minLogCheck/2)
}
