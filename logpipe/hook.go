package logpipe

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/driver"
	"github.com/flyd-dev/flyd/logfile"
	"github.com/flyd-dev/flyd/runhook"
)

// Hook is the logs step of every workload's runs (runhook.Hook): before a
// run starts, what it writes its output to, the write end of a new pipe
// read into its log or, for a runtime that writes the file itself (a
// containerd shim) or a daemon without pipes, the log file, which the
// rotator then looks after; once it ended, its last output in its log;
// once the workload is gone, its log files.
type Hook struct {
	pipes   *Pipes // nil: every run writes its log file itself
	book    *logfile.Book
	rotator *logfile.Rotator
	log     *zap.Logger
}

// drainFor bounds the wait for an ended run's output to reach its log:
// microseconds as a rule, longer only while its disk is full.
const drainFor = 2 * time.Second

// NewHook gives runs pipes of pipes (nil: none) into the logs of book,
// and has rotator look after the logs runs write themselves.
func NewHook(pipes *Pipes, book *logfile.Book, rotator *logfile.Rotator, log *zap.Logger) *Hook {
	return &Hook{pipes: pipes, book: book, rotator: rotator, log: log}
}

// keptPipe is the field of a run's record that says it writes to a pipe
// the daemon reads; a record without it is of a run that writes its log
// file itself.
const keptPipe = "log_pipe"

// Name is the hook's: "log".
func (h *Hook) Name() string { return "log" }

// piped says whether r writes to a pipe, as its record keeps.
func piped(r *runhook.Run) bool {
	var p bool
	return r.Kept.Get(keptPipe, &p) && p
}

// Prestart gives the run its output, in r.Task.Log, and keeps whether it
// is a pipe. The daemon's copy of it is closed once the run started (the
// child holds its own), or by Exited.
func (h *Hook) Prestart(_ context.Context, r *runhook.Run) error {
	name := r.Task.Workload
	r.Kept.Set(keptPipe, false)
	if _, fileOnly := r.Driver.(driver.FileLogs); !fileOnly && h.pipes != nil {
		var b [8]byte
		_, _ = rand.Read(b[:])
		f, err := h.pipes.New(name+"."+hex.EncodeToString(b[:]), sink{h.book.Log(name)})
		if err == nil {
			r.Task.Log = f
			r.Kept.Set(keptPipe, true)
		} else {
			// A run is not refused for its log: it writes the file itself.
			h.log.Error("no log pipe: the run writes its log file itself", zap.String("workload", name), zap.Error(err))
		}
	}
	if !piped(r) {
		f, err := logfile.Open(h.book.Path(name))
		if err != nil {
			return fmt.Errorf("log file: %w", err)
		}
		r.Task.Log = f
	}
	h.follow(r)
	return nil
}

// Adopt has the rotator look after the log of an adopted run that writes
// it itself. Its pipe, if it has one, the daemon took back from the
// holder at start (AdoptAll).
func (h *Hook) Adopt(_ context.Context, r *runhook.Run) { h.follow(r) }

// Exited closes the daemon's copy of a run's output that never started,
// and waits until an ended run's last lines are in its log: a reader told
// of a failure finds why.
func (h *Hook) Exited(_ context.Context, r *runhook.Run) {
	if r.Task.Log != nil {
		_ = r.Task.Log.Close()
		r.Task.Log = nil
	}
	if h.pipes != nil && !h.pipes.Drain(r.Task.Workload, drainFor) {
		h.log.Warn("the ended run's last output is not all in its log yet", zap.String("workload", r.Task.Workload), zap.Duration("waited", drainFor))
	}
}

// Destroy deletes the workload's log files: a workload of that name
// created later starts a new log.
func (h *Hook) Destroy(_ context.Context, workload string) {
	h.rotator.Unwatch(workload)
	if err := h.book.Remove(workload); err != nil {
		h.log.Warn("cannot remove logs", zap.String("workload", workload), zap.Error(err))
	}
}

// AdoptAll reads on the pipes an earlier daemon left with the holder,
// each into its workload's log (its key is the name, a dot and a nonce):
// a run adopted or not, what it wrote while no daemon read is in its
// pipe. A pipe of a workload that is not kept is closed.
func (h *Hook) AdoptAll(kept func(workload string) bool) {
	if h.pipes == nil {
		return
	}
	h.pipes.Adopt(func(key string) Sink {
		i := strings.LastIndexByte(key, '.')
		if i < 0 || !kept(key[:i]) {
			return nil
		}
		return sink{h.book.Log(key[:i])}
	})
}

// follow has the rotator look at a log its run writes itself, closely at
// first: a new run may write at once.
func (h *Hook) follow(r *runhook.Run) {
	if piped(r) {
		h.rotator.Unwatch(r.Task.Workload)
	} else {
		h.rotator.Watch(r.Task.Workload)
	}
}

// sink is a log as a pipe's sink: a log removed with its workload takes
// nothing more.
type sink struct{ l *logfile.Log }

func (s sink) Take(fd int, max int) (int, error) {
	n, err := s.l.Take(fd, max)
	if errors.Is(err, logfile.ErrRemoved) {
		err = ErrDiscard
	}
	return n, err
}
