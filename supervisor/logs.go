package supervisor

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/driver"
	"github.com/flyd-dev/flyd/logfile"
	"github.com/flyd-dev/flyd/logpipe"
	"github.com/flyd-dev/flyd/records"
)

// A run's output comes through a pipe the daemon reads (logpipe), and
// the log is bounded as it is written (logfile.Log.Take). What follows is
// for a log its run writes itself: a containerd shim's, or a run of a
// daemon from before pipes, adopted as it is.
//
// Log rotation looks at such a log every second while it grows. Once a look
// finds it has not grown, it arms the log's waker (logfile.Waker) and
// stops looking until the log is written again: with thousands of quiet
// workloads, a stat of each every few seconds was most of an idle
// daemon's CPU. A woken log, and a new run's, is looked at every second
// again. Without a waker (no inotify, or its watches used up) the looks
// at a quiet log back off to every maxLogCheck, so a burst after a quiet
// spell outgrows the limit by at most what it writes in that time.
const (
	minLogCheck = time.Second
	maxLogCheck = 8 * time.Second
)

// removeLog deletes a workload's log files; a workload of that name
// created later starts a new log.
func (s *Supervisor) removeLog(name string) {
	if err := s.logs.Remove(name); err != nil {
		s.log.Warn("cannot remove logs", zap.String("workload", name), zap.Error(err))
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
	// One slice for every pass: a fresh one each second was the idle
	// daemon's garbage, and each collection scans every workload's stacks.
	var ws []*workload
	for {
		select {
		case <-s.ctx.Done():
			return
		case now := <-t.C:
			s.mu.Lock()
			ws = ws[:0]
			for _, w := range s.workloads {
				ws = append(ws, w)
			}
			s.mu.Unlock()
			for _, w := range ws {
				check(w, now)
			}
			clear(ws) // no pointer kept to a workload removed meanwhile
		}
	}
}

// checkLog dates what w's log gained and rotates it if it is over the
// size limit, if a look is due, and schedules the next look.
func (s *Supervisor) checkLog(w *workload, now time.Time) {
	if !w.directLog.Load() {
		return // the daemon writes it, and bounds it as it does
	}
	c := &w.logs
	if w.newRun.Swap(false) || w.logWoken.Swap(false) {
		c.next, c.every = time.Time{}, 0
	}
	if now.Before(c.next) {
		return
	}
	l := s.logs.Of(w.name)
	size, err := l.Mark()
	if err != nil {
		w.log.Warn("cannot date the log", zap.Error(err))
	}
	if size >= s.cfg.LogMaxSize {
		if _, err := l.Rotate(s.holdWriters(w.name)); err != nil {
			w.log.Warn("log rotation failed", zap.Error(err))
		}
	}
	// Quiet: it did not grow since the last look. With a waker that is
	// enough to stop looking; without one, the looks back off.
	quiet := size == c.size && c.every > 0
	if size == c.size && c.every > 0 {
		c.every = min(2*c.every, maxLogCheck)
	} else {
		c.every = minLogCheck
	}
	// Half a tick early, so that the tick at that time is not missed.
	c.size, c.next = size, now.Add(c.every-minLogCheck/2)
	if quiet && s.logWaker != nil && s.logWaker.Arm(l.Path(), w.name) == nil {
		// A write between the look and the arming woke no one: look again.
		if again, err := l.Mark(); err == nil && again == size {
			c.next = now.AddDate(1000, 0, 0) // until woken
		}
	}
}

// wakeLog has the next look at a workload's log come at the next tick:
// the log was written after a quiet spell.
func (s *Supervisor) wakeLog(name string) {
	if w, err := s.lookup(name); err == nil {
		w.logWoken.Store(true)
	}
}

// runLog is what a run of name writes its output to: the write end of a
// new pipe the daemon reads into the log, or, for a runtime that must
// write the file itself or a daemon without pipes, the log file.
func (s *Supervisor) runLog(name string, d driver.Driver) (f *os.File, piped bool, err error) {
	if _, fileOnly := d.(driver.FileLogs); !fileOnly && s.cfg.LogPipes != nil {
		var b [8]byte
		_, _ = rand.Read(b[:])
		f, err := s.cfg.LogPipes.New(name+"."+hex.EncodeToString(b[:]), pipeSink{s.logs.Of(name)})
		if err == nil {
			return f, true, nil
		}
		// A run is not refused for its log: it writes the file itself.
		s.log.Error("no log pipe: the run writes its log file itself", zap.String("workload", name), zap.Error(err))
	}
	f, err = logfile.Open(s.logs.Path(name))
	if err != nil {
		return nil, false, fmt.Errorf("log file: %w", err)
	}
	return f, false, nil
}

// pipeSink is a log as a pipe's sink: a log removed with its workload
// takes nothing more.
type pipeSink struct{ l *logfile.Log }

func (p pipeSink) Take(fd int, max int) (int, error) {
	n, err := p.l.Take(fd, max)
	if errors.Is(err, logfile.ErrRemoved) {
		err = logpipe.ErrDiscard
	}
	return n, err
}

// adoptPipes reads on the pipes an earlier daemon left with the holder,
// each into its workload's log (its key is the name, a dot and a nonce):
// a run adopted or not, what it wrote while no daemon read is in its pipe.
// A pipe of a workload that no longer exists is closed.
func (s *Supervisor) adoptPipes(specs map[string]records.Workload) {
	if s.cfg.LogPipes == nil {
		return
	}
	s.cfg.LogPipes.Adopt(func(key string) logpipe.Sink {
		i := strings.LastIndexByte(key, '.')
		if i < 0 {
			return nil
		}
		if _, ok := specs[key[:i]]; !ok && s.quarantine[key[:i]] == nil {
			return nil
		}
		return pipeSink{s.logs.Of(key[:i])}
	})
}
