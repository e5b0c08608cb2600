package supervisor

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"

	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/driver"
	"github.com/flyd-dev/flyd/logfile"
	"github.com/flyd-dev/flyd/logpipe"
	"github.com/flyd-dev/flyd/records"
)

// A run's output comes through a pipe the daemon reads (logpipe), and
// the log is bounded as it is written (logfile.Log.Take). A log its run
// writes itself (a containerd shim's, or a run of a daemon from before
// pipes, adopted as it is) is the rotator's (logfile.Rotator).

// removeLog deletes a workload's log files; a workload of that name
// created later starts a new log.
func (s *Supervisor) removeLog(name string) {
	s.rotator.Unwatch(name)
	if err := s.logs.Remove(name); err != nil {
		s.log.Warn("cannot remove logs", zap.String("workload", name), zap.Error(err))
	}
}

// useLog notes whether the current run writes to a pipe; a run that
// writes its log itself has the rotator look at it, closely at first: a
// new run may write at once.
func (w *workload) useLog(piped bool) {
	w.logPipe = piped
	if piped {
		w.s.rotator.Unwatch(w.name)
	} else {
		w.s.rotator.Watch(w.name)
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
