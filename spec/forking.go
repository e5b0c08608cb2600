package spec

import (
	"path/filepath"
	"strings"
	"time"
)

// Forking says that the program daemonizes, as systemd's Type=forking
// with PIDFile=: the process flyd starts (the launcher) forks the real
// program and exits, and the program writes its pid to PIDFile. The run
// is running once that file names a live process of the workload's
// cgroup, which is then its main process: its health, its stop, its end
// and its adoption after a daemon restart are that process's.
type Forking struct {
	// PIDFile is where the program writes its pid: an absolute path,
	// which only root and the workload's user may write, in directories
	// only they may write (checked at each start).
	PIDFile string `json:"pid_file"`
	// Timeout bounds the wait for the pid file from the start: a run
	// whose file names no process of its own by then is killed and
	// counts as a failed start. Default 30s.
	Timeout Duration `json:"timeout,omitzero"`
}

// Bounds of forking.timeout.
const (
	DefaultForkingTimeout = 30 * time.Second
	MaxForkingTimeout     = time.Hour
)

func (f *Forking) setDefaults() {
	setDefault(&f.Timeout.Duration, DefaultForkingTimeout)
}

func (w *Workload) validateForking(p *problems) {
	f := w.Forking
	if f == nil {
		return
	}
	rt, ok := RuntimeOf(w.Kind)
	if ok && (rt.InContainer || rt.RunsNothing) {
		p.add("forking", "applies to %s workloads: a container's program is its main process", outsideContainers())
	}
	switch {
	case f.PIDFile == "":
		p.add("forking.pid_file", "is required: the file the program writes its pid to")
	case !filepath.IsAbs(f.PIDFile) || strings.ContainsRune(f.PIDFile, 0):
		p.add("forking.pid_file", "must be an absolute path")
	case filepath.Clean(f.PIDFile) != f.PIDFile || strings.HasSuffix(f.PIDFile, "/"):
		p.add("forking.pid_file", "must be a clean path to a file (no ., .., // or trailing /)")
	}
	if f.Timeout.Duration <= 0 || f.Timeout.Duration > MaxForkingTimeout {
		p.add("forking.timeout", "must be between 0 and %s, got %s", MaxForkingTimeout, f.Timeout.Duration)
	}
	if w.Replicas > 0 || w.ReplicaOf != "" {
		p.add("forking", "cannot be replicated: every replica would write the same pid file")
	}
}
