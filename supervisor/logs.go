package supervisor

import (
	"sync"
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

// logBook holds the daemon's one logfile.Log per workload name: its
// rotation and its readers must share it.
type logBook struct {
	mu   sync.Mutex
	s    *Supervisor
	logs map[string]*logfile.Log
}

func (b *logBook) of(name string) *logfile.Log {
	b.mu.Lock()
	defer b.mu.Unlock()
	l, ok := b.logs[name]
	if !ok {
		l = logfile.NewLog(b.s.logPath(name), b.s.cfg.LogMaxSize, b.s.cfg.LogGenerations)
		b.logs[name] = l
	}
	return l
}

// remove deletes name's log files; a workload of that name created
// later starts a new log.
func (b *logBook) remove(name string) {
	b.mu.Lock()
	l, ok := b.logs[name]
	delete(b.logs, name)
	b.mu.Unlock()
	if !ok {
		l = logfile.NewLog(b.s.logPath(name), b.s.cfg.LogMaxSize, b.s.cfg.LogGenerations)
	}
	if err := l.Remove(); err != nil {
		b.s.log.Warn("cannot remove logs", zap.String("workload", name), zap.Error(err))
	}
}

func (b *logBook) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, l := range b.logs {
		_ = l.Close()
	}
}

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

// checkLog dates what w's log gained and rotates it if it is over the
// size limit, if a look is due, and schedules the next look.
func (s *Supervisor) checkLog(w *workload, now time.Time) {
	c := &w.logs
	if w.newRun.Swap(false) {
		c.next, c.every = time.Time{}, 0
	}
	if now.Before(c.next) {
		return
	}
	l := s.logs.of(w.name)
	size, err := l.Mark()
	if err != nil {
		w.log.Warn("cannot date the log", zap.Error(err))
	}
	if size >= s.cfg.LogMaxSize {
		if _, err := l.Rotate(s.holdWriters(w.name)); err != nil {
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
