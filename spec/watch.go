package spec

import (
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Watch is one entry of a workload's watch: the files under Path (a
// directory, watched with everything under it, or one file) whose changes
// restart the workload (action restart, the default), run Exec in its
// context and then restart it (exec: a rebuild), or are copied into a
// containerd workload's root at Target (sync). Entries act only while the
// workload's Watching is set (flyd up --watch), as compose's develop.watch
// acts only under `docker compose watch` or `up --watch`.
type Watch struct {
	// Path is absolute: the CLI resolves a relative one against the spec
	// file's directory, as compose resolves develop.watch's.
	Path   string `json:"path"`
	Action string `json:"action,omitempty"`
	// Target is where, in the container, sync puts what is under Path.
	Target string `json:"target,omitempty"`
	// Ignore are globs of changes that do nothing (IgnoreMatch): matched
	// against the path relative to Path, a pattern without a '/' against
	// every part of it, "**" standing for any number of parts.
	Ignore []string `json:"ignore,omitempty"`
	// Include are globs of the changes that count, matched as Ignore's
	// are; with none, every change not ignored counts. A change counts
	// when an include glob matches it and no ignore glob does; the
	// directories under Path are watched whatever they match.
	Include []string `json:"include,omitempty"`
	// Debounce is how long a burst of changes must pause before the entry
	// acts: 300 ms when not set (MinDebounce to MaxDebounce).
	Debounce Duration `json:"debounce,omitzero"`
	// Exec is what action exec runs before the restart, as reload's exec
	// runs: in the workload's network and cgroup, as its user, with its
	// environment.
	Exec []string `json:"exec,omitempty"`
}

// Bounds on a watch entry's debounce.
const (
	MinDebounce = 10 * time.Millisecond
	MaxDebounce = time.Minute
)

// Watch actions.
const (
	WatchRestart = "restart"
	WatchSync    = "sync"
	WatchExec    = "exec"
)

// DefaultIgnore are the changes no watch acts on, whatever its ignore
// says: version control's own files, editors' debris (swap and backup
// files, vim's write probe, emacs' locks and autosaves) and Python's
// bytecode, which a restarted Python program writes beside its sources and
// would otherwise restart it again.
var DefaultIgnore = []string{".git", ".hg", ".svn", "*.swp", "*.swx", "*~", ".#*", "#*#", "4913", "__pycache__", "*.pyc"}

// Watches says whether the workload's watch entries act: it has some,
// and watching is on.
func (w *Workload) Watches() bool { return w.Watching && len(w.Watch) > 0 }

func (w *Workload) setWatchDefaults() {
	if len(w.Watch) == 0 {
		w.Watch = nil
		return
	}
	for i := range w.Watch {
		e := &w.Watch[i]
		setDefault(&e.Action, WatchRestart)
		if len(e.Ignore) == 0 {
			e.Ignore = nil
		}
		if len(e.Include) == 0 {
			e.Include = nil
		}
		if len(e.Exec) == 0 {
			e.Exec = nil
		}
	}
}

// validateWatch judges what can be judged of the watch without reading
// the files: the daemon judges the paths themselves at apply (absolute,
// there, a directory or a file), when watching is on.
func (w *Workload) validateWatch(p *problems) {
	if w.Watching && len(w.Watch) == 0 {
		p.add("watching", "is on, and there is no watch entry to act")
	}
	if len(w.Watch) > 0 && w.runtime().RunsNothing {
		p.add("watch", "kind external runs nothing to restart")
		return
	}
	for i, e := range w.Watch {
		field := indexPath("watch", i)
		switch {
		case e.Path == "" || strings.ContainsRune(e.Path, 0):
			p.add(joinPath(field, "path"), "must be a path")
		}
		switch e.Action {
		case WatchRestart, WatchExec, WatchSync:
		default:
			p.add(joinPath(field, "action"), "must be restart, exec or sync, not %q", e.Action)
		}
		switch {
		case e.Action == WatchExec && len(e.Exec) == 0:
			p.add(joinPath(field, "exec"), "is required by action exec: the command to run before the restart")
		case e.Action != WatchExec && len(e.Exec) > 0:
			p.add(joinPath(field, "exec"), "is run by action exec only; this entry's action is %s", e.Action)
		case e.Action == WatchExec && w.runtime().InContainer:
			p.add(joinPath(field, "action"), "exec applies to %s workloads, as reload.exec does: a container's files change by sync", outsideContainers())
		}
		validateArgv(p, joinPath(field, "exec"), e.Exec)
		switch {
		case e.Action == WatchSync && !w.runtime().InContainer:
			p.add(joinPath(field, "action"), "sync copies into a container's root: it applies to kind containerd, and this workload's files are the host's already (use restart)")
		case e.Action == WatchSync && (!filepath.IsAbs(e.Target) || strings.ContainsRune(e.Target, 0)):
			p.add(joinPath(field, "target"), "must be an absolute path in the container, where sync puts what is under path")
		case e.Action != WatchSync && e.Target != "":
			p.add(joinPath(field, "target"), "is for action sync only")
		}
		for key, globs := range map[string][]string{"ignore": e.Ignore, "include": e.Include} {
			for j, g := range globs {
				if err := ValidIgnore(g); err != nil {
					p.add(indexPath(joinPath(field, key), j), "%v", err)
				}
			}
		}
		if d := e.Debounce.Duration; d != 0 && (d < MinDebounce || d > MaxDebounce) {
			p.add(joinPath(field, "debounce"), "must be between %s and %s, got %s", MinDebounce, MaxDebounce, d)
		}
	}
}

// ValidIgnore says why an ignore glob does not compile, if it does not.
func ValidIgnore(pattern string) error {
	if pattern == "" || strings.ContainsRune(pattern, 0) {
		return errBadIgnore("must be a glob")
	}
	if len(pattern) > maxIgnore || strings.Count(pattern, "**") > maxDoubleStars {
		return errBadIgnore("is over %d characters or %d \"**\"s", maxIgnore, maxDoubleStars)
	}
	if strings.HasPrefix(pattern, "/") {
		return errBadIgnore("is relative to the watch's path: leave out the leading /")
	}
	for _, part := range strings.Split(pattern, "/") {
		if part == "**" {
			continue
		}
		if _, err := path.Match(part, ""); err != nil {
			return errBadIgnore("%q does not compile: %v", pattern, err)
		}
	}
	return nil
}

func errBadIgnore(format string, args ...any) error { return fmt.Errorf(format, args...) }

// maxIgnore bounds an ignore glob, and maxDoubleStars its "**"s, which
// each try every depth: a glob is matched against every change.
const (
	maxIgnore      = 256
	maxDoubleStars = 4
)

// IgnoreMatch says whether pattern ignores rel, a path relative to a
// watch's path with '/' between its parts. A pattern without a '/' is
// matched against each part (node_modules ignores that directory wherever
// it is, and what is under it; *.log any log file); one with a '/' against
// the whole path from the watch's path, where "**" stands for any number
// of parts (build/**/*.o), and a match of a directory ignores what is
// under it too.
func IgnoreMatch(pattern, rel string) bool {
	parts := strings.Split(rel, "/")
	if !strings.Contains(pattern, "/") {
		for _, p := range parts {
			if ok, _ := path.Match(pattern, p); ok {
				return true
			}
		}
		return false
	}
	return matchParts(strings.Split(pattern, "/"), parts)
}

// matchParts matches pattern parts against path parts; a pattern that is
// used up while parts remain has matched a directory above them.
func matchParts(pat, parts []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			for i := 0; i <= len(parts); i++ {
				if matchParts(pat[1:], parts[i:]) {
					return true
				}
			}
			return false
		}
		if len(parts) == 0 {
			return false
		}
		if ok, _ := path.Match(pat[0], parts[0]); !ok {
			return false
		}
		pat, parts = pat[1:], parts[1:]
	}
	return true
}

// Included says whether a change of rel counts by the entry's include
// globs: it matches one, or the entry has none.
func (e Watch) Included(rel string) bool {
	if len(e.Include) == 0 {
		return true
	}
	for _, g := range e.Include {
		if IgnoreMatch(g, rel) {
			return true
		}
	}
	return false
}

// Ignored says whether a change of rel is ignored by the entry: by
// DefaultIgnore or its own globs.
func (e Watch) Ignored(rel string) bool {
	for _, g := range DefaultIgnore {
		if IgnoreMatch(g, rel) {
			return true
		}
	}
	for _, g := range e.Ignore {
		if IgnoreMatch(g, rel) {
			return true
		}
	}
	return false
}

// cloneWatch is a deep copy of a workload's watch.
func cloneWatch(ws []Watch) []Watch {
	if ws == nil {
		return nil
	}
	out := make([]Watch, len(ws))
	for i, e := range ws {
		e.Ignore, e.Exec = slices.Clone(e.Ignore), slices.Clone(e.Exec)
		out[i] = e
	}
	return out
}

// OnlyWatchingDiffers says whether a and b are the same workload but for
// Watching: turning watching on or off changes no run.
func OnlyWatchingDiffers(a, b *Workload) bool {
	if a == nil || b == nil || a.Watching == b.Watching {
		return false
	}
	c := b.Clone()
	c.Watching = a.Watching
	return Equal(a, c)
}
