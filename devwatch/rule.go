package devwatch

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/spec"
)

// rule is one armed watch entry. Each entry has its own inotify instance
// (fsnotify, as the workloads directory's watch) holding a watch per
// directory of its tree, added as directories appear.
type rule struct {
	set  *Set
	acts Actions
	log  *zap.Logger
	i    int
	e    spec.Watch
	// root is the directory watched: the entry's path, or a file's
	// directory, with its symlinks resolved once, here; file is the name
	// of the file watched, when the path is one.
	root, file string
	fw         *fsnotify.Watcher
	// watched are the directories with a watch, which only run touches
	// once it has started.
	watched map[string]bool
	full    bool // said that the tree outgrew MaxDirs
}

var errTooManyDirs = fmt.Errorf("over %d directories to watch (not counting those ignored): ignore some (node_modules, build output) or watch a narrower path", MaxDirs)

func (s *Set) newRule(i int, e spec.Watch, act Actions, log *zap.Logger) (*rule, error) {
	root, err := filepath.EvalSymlinks(e.Path)
	if err != nil {
		return nil, err
	}
	fi, err := os.Stat(root)
	if err != nil {
		return nil, err
	}
	r := &rule{set: s, acts: act, log: log, i: i, e: e, root: root, watched: map[string]bool{}}
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
// swapped for a link between the walk and the watch is let go at once. A
// directory watched already (made under a new one as its walk went) is
// counted once.
func (r *rule) addDir(p string) error {
	if r.watched[p] {
		return nil
	}
	if r.set.dirs.Add(1) > MaxDirs {
		r.set.dirs.Add(-1)
		return errTooManyDirs
	}
	if err := r.fw.Add(p); err != nil {
		r.set.dirs.Add(-1)
		return err
	}
	if fi, err := os.Lstat(p); err != nil || !fi.IsDir() {
		_ = r.fw.Remove(p)
		r.set.dirs.Add(-1)
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
			r.set.dirs.Add(-1)
		}
	}
}

func (r *rule) forgetAll() {
	r.set.dirs.Add(-int64(len(r.watched)))
	clear(r.watched)
}

func (r *rule) run(ctx context.Context) {
	defer r.fw.Close()
	defer r.forgetAll()
	b := burst{quiet: Quiet, max: MaxWait}
	if d := r.e.Debounce.Duration; d > 0 {
		b.quiet, b.max = d, max(MaxWait, 2*d)
	}
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
			r.log.Warn("watch", zap.Int("entry", r.i), zap.Error(err))
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
		r.acts.Say(fmt.Sprintf("watch[%d] %s: removed or moved away, so not watched until the workload is applied again", r.i, r.e.Path))
		return false
	}
	rel := r.rel(ev.Name)
	if rel == "" || r.e.Ignored(rel) {
		return false
	}
	// A directory that is not included still counts for what it brings
	// (addTree, below) and what it took away (a directory watched).
	counts := r.e.Included(rel) || ev.Has(fsnotify.Remove|fsnotify.Rename) && r.watched[ev.Name]
	if counts {
		ch.add(rel)
	}
	if ev.Has(fsnotify.Remove | fsnotify.Rename) {
		r.forget(ev.Name) // a directory's watch goes with it; a file had none
	}
	if ev.Has(fsnotify.Create) {
		if fi, err := os.Lstat(ev.Name); err == nil && fi.IsDir() {
			err := r.addTree(ev.Name, func(rel string) {
				if r.e.Included(rel) {
					ch.add(rel)
					counts = true
				}
			})
			if errors.Is(err, errTooManyDirs) && !r.full {
				r.full = true
				r.acts.Say(fmt.Sprintf("watch[%d] %s: %s is not watched, nor what comes after it: %v", r.i, r.e.Path, rel, err))
			}
		}
	}
	return counts
}
