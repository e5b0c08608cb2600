// Package devwatch watches a workload's source trees while it is being
// developed (spec.Watch, flyd up --watch) and, once a burst of changes
// settles, acts: restart the run, run a command and then restart it, or
// copy what changed into the running container's root.
//
// It owns the inotify watches, the ignore globs, the debouncing and the
// copy; what an action does to a run it asks of its Actions, which the
// supervisor implements on the workload's loop. It knows nothing of
// workloads' lifecycles, and it is not the workloads directory's watch.
package devwatch

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/spec"
)

const (
	// MaxDirs bounds the directories one workload's watch holds: each is
	// an inotify watch (about 1 KiB of the kernel's memory, counted
	// against fs.inotify.max_user_watches, which the daemon's log waker
	// shares). A tree over it is refused at apply (Check), naming it; one
	// that grows over it later has the rest unwatched, said once.
	MaxDirs = 4096
	// Quiet is how long changes must pause before the action: an
	// editor's save, a formatter run after it, a `git checkout` of many
	// files are each one action.
	Quiet = 300 * time.Millisecond
	// MaxWait bounds the wait of changes that never pause.
	MaxWait = 2 * time.Second
	// ExecTimeout bounds an exec entry's command: a rebuild.
	ExecTimeout = 10 * time.Minute
	// maxChanges bounds the names one action keeps; the rest are counted.
	maxChanges = 10000
)

// ErrGone is what an Actions method returns once the watch it was asked
// from is no longer the workload's (its spec changed, it was removed):
// the action is dropped without a word.
var ErrGone = errors.New("watch disarmed")

// Actions are what a watch asks of its workload. Each may block until the
// workload's owner takes it, and must give up when ctx ends.
type Actions interface {
	// Restart replaces the run, and says what became of it.
	Restart(ctx context.Context) (string, error)
	// Command readies argv to run as the workload's own commands run;
	// skip, when set, says why nothing is to be done instead.
	Command(ctx context.Context, argv []string) (run func(context.Context) error, skip string, err error)
	// Log writes a line of the daemon's into the workload's log.
	Log(ctx context.Context, line string)
	// Root opens the running container's root directory (O_PATH), which
	// the caller closes; -1 when no container runs.
	Root(ctx context.Context) (int, error)
	// Say tells what a watch did, or why it could not: a watch event.
	Say(msg string)
}

// Set is the armed watch of one workload's entries: a goroutine and an
// inotify instance each, until Stop.
type Set struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// dirs counts the directories watched, over every entry: added to by
	// each entry's goroutine before it watches one more (and taken back
	// when over MaxDirs), so that the bound holds without a lock; it
	// guards nothing else.
	dirs atomic.Int64
}

// Arm watches each of entries and acts through act on what changes under
// them, until ctx ends or Stop. An entry whose path cannot be watched is
// said (act.Say) and left out; the others go on.
func Arm(ctx context.Context, entries []spec.Watch, act Actions, log *zap.Logger) *Set {
	ctx, cancel := context.WithCancel(ctx)
	set := &Set{cancel: cancel}
	for i, e := range entries {
		r, err := set.newRule(i, e, act, log)
		if err != nil {
			log.Warn("cannot watch", zap.Int("entry", i), zap.String("path", e.Path), zap.Error(err))
			act.Say(fmt.Sprintf("watch[%d] %s: not watched: %v", i, e.Path, err))
			continue
		}
		act.Say(fmt.Sprintf("watch[%d] %s: watching %s (%s)", i, e.Path, r.extent(), e.Action))
		set.wg.Go(func() { r.run(ctx) })
	}
	return set
}

// Stop ends the watch and waits for its goroutines: an action under way
// is abandoned where it waits on its Actions.
func (s *Set) Stop() {
	s.cancel()
	s.wg.Wait()
}
