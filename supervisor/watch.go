package supervisor

// Watch: a workload's watch entries (spec.Watch), while its spec says
// watching (flyd up --watch), restart it, rebuild and restart it, or copy
// files into its container when files under their paths change.
//
// Each entry has a goroutine and an inotify instance (fsnotify, as the
// workloads directory's watch) holding a watch per directory of its tree,
// added as directories appear, at most maxWatchDirs for the workload. A
// burst of changes is one action (burst). What an action does to the run
// is done on the workload's loop, as any command; what takes long (a
// build, a copy) is not, so that a stop or a removal is never held up by
// it. The loop arms the watch when it sees a spec that watches
// (rewatch, at each turn: a pointer compared) and disarms it when the spec
// changes and when the loop ends, waiting for the goroutines: no watch
// outlives its workload.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/health"
	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/status"
)

const (
	// maxWatchDirs bounds the directories one workload's watch holds: each
	// is an inotify watch (about 1 KiB of the kernel's memory, counted
	// against fs.inotify.max_user_watches, which the daemon's log waker
	// shares). A tree over it is refused at apply, naming it; one that
	// grows over it later has the rest unwatched, said once in an event.
	maxWatchDirs = 4096
	// watchQuiet is how long changes must pause before the action: an
	// editor's save, a formatter run after it, a `git checkout` of many
	// files are each one action.
	watchQuiet = 300 * time.Millisecond
	// watchMaxWait bounds the wait of changes that never pause.
	watchMaxWait = 2 * time.Second
	// watchExecTimeout bounds an exec entry's command: a rebuild.
	watchExecTimeout = 10 * time.Minute
	// maxChanges bounds the names one action keeps; the rest are counted.
	maxChanges = 10000
)

// watcher is the armed watch of one spec of a workload; the loop owns it.
type watcher struct {
	sp     *spec.Workload
	cancel context.CancelFunc
	wg     sync.WaitGroup
	dirs   atomic.Int64 // directories watched, over every entry
}

// rewatch makes the watch follow the spec, on the loop: armed for a spec
// that watches, disarmed for one that does not. A watch is armed once per
// spec, whether or not its paths could be watched (an event says why not).
func (w *workload) rewatch() {
	if w.watch != nil && w.watch.sp == w.spec || w.watch == nil && !w.spec.Watches() {
		return
	}
	onFreshStack(func() {
		was := w.watch != nil && w.watch.sp.Watches()
		w.unwatch()
		if w.spec.Watches() {
			w.armWatch()
		} else if was {
			w.publish(status.Event{Type: status.EventWatch, Message: "not watching any more"})
		}
	})
}

// unwatch ends the watch and waits for its goroutines. It is called on the
// loop, which an entry's goroutine may be waiting for: a call to the loop
// selects on the watch's context too, which ends first.
func (w *workload) unwatch() {
	if w.watch == nil {
		return
	}
	w.watch.cancel()
	w.watch.wg.Wait()
	w.watch = nil
}

func (w *workload) armWatch() {
	ctx, cancel := context.WithCancel(w.s.ctx)
	wt := &watcher{sp: w.spec, cancel: cancel}
	w.watch = wt
	for i, e := range w.spec.Watch {
		r, err := w.newRule(wt, i, e)
		if err != nil {
			w.log.Warn("cannot watch", zap.Int("entry", i), zap.String("path", e.Path), zap.Error(err))
			w.publish(status.Event{Type: status.EventWatch, Message: fmt.Sprintf("watch[%d] %s: not watched: %v", i, e.Path, err)})
			continue
		}
		w.publish(status.Event{Type: status.EventWatch, Message: fmt.Sprintf("watch[%d] %s: watching %s (%s)", i, e.Path, r.extent(), e.Action)})
		wt.wg.Go(func() { r.run(ctx) })
	}
}

// rule is one armed watch entry.
type rule struct {
	w  *workload
	wt *watcher
	i  int
	e  spec.Watch
	// root is the directory watched: the entry's path, or a file's
	// directory, with its symlinks resolved once, here; file is the name
	// of the file watched, when the path is one.
	root, file string
	fw         *fsnotify.Watcher
	// watched are the directories with a watch, which only run touches
	// once it has started.
	watched map[string]bool
	full    bool // said that the tree outgrew maxWatchDirs
}

var errTooManyDirs = fmt.Errorf("over %d directories to watch (not counting those ignored): ignore some (node_modules, build output) or watch a narrower path", maxWatchDirs)

func (w *workload) newRule(wt *watcher, i int, e spec.Watch) (*rule, error) {
	root, err := filepath.EvalSymlinks(e.Path)
	if err != nil {
		return nil, err
	}
	fi, err := os.Stat(root)
	if err != nil {
		return nil, err
	}
	r := &rule{w: w, wt: wt, i: i, e: e, root: root, watched: map[string]bool{}}
	if !fi.IsDir() {
		if !fi.Mode().IsRegular() {
			return nil, errors.New("neither a directory nor a file")
		}
		// Its directory is watched, for the name alone: an editor's save
		// by rename replaces the file's inode, which a watch on the file
		// would lose.
		r.root, r.file = filepath.Dir(root), filepath.Base(root)
	}
	if r.fw, err = fsnotify.NewWatcher(); err != nil {
		return nil, err
	}
	if r.file != "" {
		err = r.addDir(r.root)
	} else {
		err = r.addTree(r.root, nil)
	}
	if err != nil {
		r.fw.Close()
		r.forgetAll()
		return nil, err
	}
	return r, nil
}

// extent says what the rule watches.
func (r *rule) extent() string {
	if r.file != "" {
		return "the file"
	}
	if n := len(r.watched); n != 1 {
		return fmt.Sprintf("%d directories", n)
	}
	return "1 directory"
}

// rel is p relative to the root, with '/' between its parts; "" for the
// root itself.
func (r *rule) rel(p string) string {
	if p == r.root {
		return ""
	}
	return strings.TrimPrefix(p, r.root+"/")
}

// addDir watches one directory, never through a symlink: a directory
// swapped for a link between the walk and the watch is let go at once.
func (r *rule) addDir(p string) error {
	if r.wt.dirs.Add(1) > maxWatchDirs {
		r.wt.dirs.Add(-1)
		return errTooManyDirs
	}
	if err := r.fw.Add(p); err != nil {
		r.wt.dirs.Add(-1)
		return err
	}
	if fi, err := os.Lstat(p); err != nil || !fi.IsDir() {
		_ = r.fw.Remove(p)
		r.wt.dirs.Add(-1)
		return fs.ErrNotExist
	}
	r.watched[p] = true
	return nil
}

// addTree watches top and every directory under it that is not ignored,
// following no symlink; changed, when set, is told of every entry found
// (what a new directory brought with it).
func (r *rule) addTree(top string, changed func(rel string)) error {
	return filepath.WalkDir(top, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == top {
				return err
			}
			return nil // gone meanwhile, or unreadable: nothing to watch
		}
		rel := r.rel(p)
		if rel != "" && r.e.Ignored(rel) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if changed != nil && rel != "" {
			changed(rel)
		}
		if !d.IsDir() { // a file, or a symlink: never followed
			return nil
		}
		if err := r.addDir(p); err != nil {
			if errors.Is(err, fs.ErrNotExist) && p != top {
				return filepath.SkipDir
			}
			return err
		}
		return nil
	})
}

// forget drops the watches of p and of every directory under it.
func (r *rule) forget(p string) {
	for d := range r.watched {
		if d == p || strings.HasPrefix(d, p+"/") {
			delete(r.watched, d)
			_ = r.fw.Remove(d)
			r.wt.dirs.Add(-1)
		}
	}
}

func (r *rule) forgetAll() {
	r.wt.dirs.Add(-int64(len(r.watched)))
	clear(r.watched)
}

// changes are the paths that changed since the last action.
type changes struct {
	names map[string]bool
	more  int
	lost  bool // the kernel's queue overflowed: what changed is unknown
}

func (c *changes) add(rel string) {
	if c.names == nil {
		c.names = map[string]bool{}
	}
	if len(c.names) < maxChanges || c.names[rel] {
		c.names[rel] = true
	} else {
		c.more++
	}
}

func (c *changes) empty() bool { return len(c.names) == 0 && c.more == 0 && !c.lost }

// String names the first few changes and counts the rest.
func (c *changes) String() string {
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range c.names {
			if !yield(n) {
				return
			}
		}
	})
	const shown = 3
	s := strings.Join(names[:min(len(names), shown)], ", ")
	if n := len(names) - shown + c.more; n > 0 {
		s += fmt.Sprintf(" and %d more", n)
	}
	switch {
	case c.lost && s == "":
		return "files changed (the kernel dropped their names: its queue overflowed)"
	case c.lost:
		s += " (and more: the kernel's queue overflowed)"
	}
	return s + " changed"
}

// burst tells when a burst of changes has settled: quiet after its last
// change, or max after its first when changes never pause.
type burst struct {
	quiet, max  time.Duration
	first, last time.Time
}

// add notes a change at now and says when to act if no other comes.
func (b *burst) add(now time.Time) time.Time {
	if b.first.IsZero() {
		b.first = now
	}
	b.last = now
	return b.due()
}

func (b *burst) due() time.Time {
	d := b.last.Add(b.quiet)
	if limit := b.first.Add(b.max); limit.Before(d) {
		d = limit
	}
	return d
}

func (b *burst) reset() { b.first, b.last = time.Time{}, time.Time{} }

func (r *rule) run(ctx context.Context) {
	defer r.fw.Close()
	defer r.forgetAll()
	b := burst{quiet: watchQuiet, max: watchMaxWait}
	var ch changes
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	noted := func() {
		now := time.Now()
		timer.Reset(b.add(now).Sub(now))
	}
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-r.fw.Events:
			if !ok {
				return
			}
			if r.note(ev, &ch) {
				noted()
			}
		case err, ok := <-r.fw.Errors:
			if !ok {
				return
			}
			r.w.log.Warn("watch", zap.Int("entry", r.i), zap.Error(err))
			ch.lost = true
			noted()
		case <-timer.C:
			if !ch.empty() {
				r.act(ctx, &ch)
			}
			ch = changes{}
			b.reset()
		}
	}
}

// note takes one event: it says whether it is a change to act on, and
// watches a directory that appeared.
func (r *rule) note(ev fsnotify.Event, ch *changes) bool {
	if ev.Op == fsnotify.Chmod {
		return false // a touch of attributes: no content changed
	}
	if r.file != "" {
		if filepath.Dir(ev.Name) != r.root || filepath.Base(ev.Name) != r.file {
			return false
		}
		ch.add(r.file)
		return true
	}
	if ev.Name == r.root && ev.Has(fsnotify.Remove|fsnotify.Rename) {
		r.forget(r.root)
		r.w.publish(status.Event{Type: status.EventWatch, Message: fmt.Sprintf("watch[%d] %s: removed or moved away, so not watched until the workload is applied again", r.i, r.e.Path)})
		return false
	}
	rel := r.rel(ev.Name)
	if rel == "" || r.e.Ignored(rel) {
		return false
	}
	ch.add(rel)
	if ev.Has(fsnotify.Remove | fsnotify.Rename) {
		r.forget(ev.Name) // a directory's watch goes with it; a file had none
	}
	if ev.Has(fsnotify.Create) {
		if fi, err := os.Lstat(ev.Name); err == nil && fi.IsDir() {
			err := r.addTree(ev.Name, ch.add)
			if errors.Is(err, errTooManyDirs) && !r.full {
				r.full = true
				r.w.publish(status.Event{Type: status.EventWatch, Message: fmt.Sprintf("watch[%d] %s: %s is not watched, nor what comes after it: %v", r.i, r.e.Path, rel, err)})
			}
		}
	}
	return true
}

// errWatchGone says the watch an action came from is no longer armed.
var errWatchGone = errors.New("watch disarmed")

// onLoop runs f on the workload's loop while the rule's watch is armed.
func (r *rule) onLoop(ctx context.Context, f func() error) error {
	return r.w.call(ctx, func() error {
		if r.w.watch != r.wt {
			return errWatchGone
		}
		return f()
	})
}

// act does the entry's action about what changed, and says what it did in
// a watch event.
func (r *rule) act(ctx context.Context, ch *changes) {
	prefix := fmt.Sprintf("watch[%d] %s: %s: ", r.i, r.e.Path, ch)
	var did string
	var err error
	switch r.e.Action {
	case spec.WatchExec:
		did, err = r.rebuild(ctx)
	case spec.WatchSync:
		did, err = r.sync(ctx, ch)
	default:
		err = r.onLoop(ctx, func() error {
			did = r.w.restartForWatch()
			return nil
		})
	}
	switch {
	case ctx.Err() != nil || errors.Is(err, errWatchGone) || errors.Is(err, errRemoved):
		return // disarmed meanwhile: the workload changed or went
	case err != nil:
		r.w.log.Warn("watch action failed", zap.Int("entry", r.i), zap.Error(err))
		did = err.Error()
	}
	r.w.log.Info("watch", zap.Int("entry", r.i), zap.String("changed", ch.String()), zap.String("did", did))
	r.w.publish(status.Event{Type: status.EventWatch, Message: prefix + did})
}

// restartForWatch replaces the run, on the loop, unless the workload was
// stopped by request: a workload that failed, exited or waits to be
// restarted is started, since what changed may be its fix.
func (w *workload) restartForWatch() string {
	if st := w.snapshot(false).State; st == status.Stopped {
		return "nothing done: " + w.name + " is stopped (flyd start runs it again)"
	}
	if err := w.stopRun(); err != nil {
		return "restart failed: " + err.Error()
	}
	if err := w.userStart(); err != nil {
		return "restart failed: " + err.Error()
	}
	if v := w.snapshot(false); v.State == status.Running {
		return fmt.Sprintf("restarted (pid %d)", v.PID)
	} else {
		return "restarted: " + string(v.State) + reasonSuffix(v.Reason)
	}
}

func reasonSuffix(reason string) string {
	if reason == "" {
		return ""
	}
	return " (" + reason + ")"
}

// rebuild runs the entry's command as reload's exec runs, off the loop,
// and restarts the workload once it succeeds; one that fails leaves the
// run as it is, and says why in the workload's log too.
func (r *rule) rebuild(ctx context.Context) (string, error) {
	var p health.Probe
	skip := ""
	err := r.onLoop(ctx, func() error {
		if st := r.w.snapshot(false).State; st == status.Stopped {
			skip = "nothing done: " + r.w.name + " is stopped (flyd start runs it again)"
			return nil
		}
		nw, err := r.w.s.net.Namespace(r.w.spec.Network)
		if err != nil {
			return err
		}
		p, err = r.w.execIn(nw, r.e.Exec)
		return err
	})
	if err != nil || skip != "" {
		return skip, err
	}
	start := time.Now()
	cctx, cancel := context.WithTimeout(ctx, watchExecTimeout)
	err = p.Check(cctx)
	cancel()
	took := time.Since(start).Round(time.Millisecond)
	if ctx.Err() != nil {
		return "", ctx.Err()
	}
	if err != nil {
		msg := fmt.Sprintf("exec %s failed after %s, so the last run goes on: %v", r.e.Exec[0], took, err)
		_ = r.onLoop(ctx, func() error {
			if lerr := r.w.s.logs.of(r.w.name).Append([]byte("flyd: watch: " + msg + "\n")); lerr != nil {
				r.w.log.Warn("cannot write the failed rebuild to the log", zap.Error(lerr))
			}
			return nil
		})
		return msg, nil
	}
	did := ""
	err = r.onLoop(ctx, func() error {
		did = r.w.restartForWatch()
		return nil
	})
	return fmt.Sprintf("exec %s done in %s; %s", r.e.Exec[0], took, did), err
}

// checkWatch judges a spec's watch paths at apply, as the daemon will read
// them: absolute (a client resolves a relative one against its spec file's
// directory), and, while watching is on, there, a directory or a file, and
// a tree within maxWatchDirs. It reads them as root, for root's callers
// only: a caller that --peer-users confines is refused watching before
// (api.PeerUsersPolicy).
func checkWatch(sp *spec.Workload) error {
	var errs []error
	for i, e := range sp.Watch {
		field := fmt.Sprintf("watch[%d].path", i)
		if !filepath.IsAbs(e.Path) {
			errs = append(errs, &spec.FieldError{Field: field, Msg: fmt.Sprintf("%q is relative: flyd apply and up resolve it against the spec file's directory; the API takes an absolute path", e.Path)})
			continue
		}
		if !sp.Watching {
			continue // not read until watching is on
		}
		fi, err := os.Stat(e.Path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			errs = append(errs, &spec.FieldError{Field: field, Msg: e.Path + " does not exist"})
			continue
		case err != nil:
			errs = append(errs, &spec.FieldError{Field: field, Msg: err.Error()})
			continue
		case !fi.IsDir() && !fi.Mode().IsRegular():
			errs = append(errs, &spec.FieldError{Field: field, Msg: e.Path + " is neither a directory nor a file"})
			continue
		case !fi.IsDir():
			continue
		}
		if err := countDirs(e); err != nil {
			errs = append(errs, &spec.FieldError{Field: field, Msg: fmt.Sprintf("%s holds %v", e.Path, err)})
		}
	}
	return errors.Join(errs...)
}

// countDirs refuses a tree of more directories to watch than the bound.
func countDirs(e spec.Watch) error {
	root, err := filepath.EvalSymlinks(e.Path)
	if err != nil {
		return err
	}
	n := 0
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if p != root && e.Ignored(strings.TrimPrefix(p, root+"/")) {
			return filepath.SkipDir
		}
		if n++; n > maxWatchDirs {
			return errTooManyDirs
		}
		return nil
	})
}

// setWatching takes sp, the workload's spec with watching turned on or
// off, without touching the run: recorded, then armed or disarmed at the
// loop's next turn.
func (w *workload) setWatching(sp *spec.Workload) error {
	old := w.spec
	v := w.snapshot(false)
	w.setSpec(sp, w.ports)
	if err := w.persist(v.State, v.Reason); err != nil {
		w.setSpec(old, w.ports)
		return err
	}
	return nil
}
