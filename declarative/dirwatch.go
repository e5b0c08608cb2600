package declarative

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/fsnotify/fsnotify"
	"go.uber.org/zap"
)

// dirWatch watches the workloads directory, or while it does not exist its
// nearest existing parent, to see it appear. It only says whether something
// relevant happened; what changed is read from the directory.
type dirWatch struct {
	dir     string
	log     *zap.Logger
	fw      *fsnotify.Watcher // nil when not watching
	watched string            // dir, or the parent watched instead
}

// armAttempts bounds arm's retries against a tree that changes under it.
const armAttempts = 8

// arm (re)starts watching the nearest existing directory on the way to dir. A
// fresh fsnotify watcher each time drops any watch left on a directory that
// was removed or moved away, and arming is rare.
func (d *dirWatch) arm() error {
	d.close()
	for range armAttempts {
		target := nearestDir(d.dir)
		fw, err := fsnotify.NewWatcher()
		if err != nil {
			return err
		}
		err = fw.Add(target)
		if errors.Is(err, fs.ErrNotExist) {
			fw.Close()
			continue // removed between Stat and Add
		}
		if err != nil {
			fw.Close()
			return fmt.Errorf("watch %s: %w", target, err)
		}
		if nearestDir(d.dir) != target {
			// A directory on the way appeared before the watch was in
			// place; its Create event was missed, so go deeper now.
			fw.Close()
			continue
		}
		d.fw, d.watched = fw, target
		if target != d.dir {
			d.log.Info("workloads directory missing; watching for it", zap.String("watching", target))
		}
		return nil
	}
	return fmt.Errorf("watch %s: the directory tree keeps changing", d.dir)
}

func (d *dirWatch) close() {
	if d.fw != nil {
		d.fw.Close()
		d.fw, d.watched = nil, ""
	}
}

// stale says whether the watch is not on the directory it should be on.
func (d *dirWatch) stale() bool {
	return d.fw == nil || nearestDir(d.dir) != d.watched
}

// events and errors are nil channels (never ready) when not watching.
func (d *dirWatch) events() <-chan fsnotify.Event {
	if d.fw == nil {
		return nil
	}
	return d.fw.Events
}

func (d *dirWatch) errors() <-chan error {
	if d.fw == nil {
		return nil
	}
	return d.fw.Errors
}

// handle reports whether ev calls for a reconcile, and moves the watch when
// the directory or a parent of it appeared, vanished or moved.
func (d *dirWatch) handle(ev fsnotify.Event) bool {
	if ev.Name == d.dir || isParentOf(ev.Name, d.dir) {
		if err := d.arm(); err != nil {
			d.log.Warn("cannot watch workloads directory", zap.Error(err))
		}
		return true
	}
	return d.watched == d.dir && filepath.Dir(ev.Name) == d.dir &&
		(isSpecFile(filepath.Base(ev.Name)) || isEnvFile(filepath.Base(ev.Name)))
}

func isParentOf(parent, path string) bool {
	return strings.HasPrefix(path, parent+string(filepath.Separator)) || (parent == "/" && path != "/")
}

// nearestDir is path, or its nearest parent that is an existing directory.
func nearestDir(path string) string {
	for {
		if fi, err := os.Stat(path); err == nil && fi.IsDir() {
			return path
		}
		parent := filepath.Dir(path)
		if parent == path {
			return path
		}
		path = parent
	}
}
