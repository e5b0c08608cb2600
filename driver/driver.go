// Package driver is the one interface every runtime implements (native, nix,
// containerd, external), and a daemon's runtimes as a whole (Runtimes:
// which kinds can run now, an earlier daemon's run alive or gone, named
// volumes, the sweep of what no workload owns). The supervisor decides
// when a workload runs; a driver only knows how to start one run of it,
// watch it, signal it, and adopt it again after the daemon restarts.
//
// A driver never restarts anything and never decides policy: that is the
// supervisor's. Stop is built by the supervisor from Signal, Kill and Done, so
// that the grace-period logic exists once for every runtime.
package driver

import (
	"context"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"

	"github.com/flyd-dev/flyd/carriers"
	"github.com/flyd-dev/flyd/sandbox"
	"github.com/flyd-dev/flyd/spec"
)

// Task is everything a driver needs to start one run of a workload. The
// supervisor has already expanded the command and built the environment.
type Task struct {
	Workload string
	Spec     *spec.Workload
	Args     []string
	Env      []string
	// Files are values too large for the environment, to be delivered as
	// files; CarrierDir is where a host runtime writes them (it does not
	// exist yet) and removes them when the run ends.
	Files      []carriers.File
	CarrierDir string
	// Network is the isolated network the run joins; nil for the host's.
	Network *sandbox.Network
	// Cgroup is the workload's cgroup, limits applied, that the run is born
	// in; nil where the host gives flyd no cgroups.
	Cgroup *sandbox.Cgroup
	// Mounts are the directories a host runtime binds in the run's own
	// mount namespace (sandbox.StartWithMounts): its project's /dev/shm,
	// which the project's runs share and no one else sees, and its own
	// /tmp; none leaves the host's. Its network's /etc/hosts (Hosts) is
	// bound in a container too.
	Mounts sandbox.Mounts
	// Limits are the spec's resources, parsed once: what Cgroup holds, and
	// what a runtime that makes its own cgroup must apply.
	Limits sandbox.Limits
	// Preparing, when the runtime must first build something (a Nix
	// environment, an image), says what; the workload is then `preparing`.
	// It is called on Start's goroutine. May be nil.
	Preparing func(what string)
	// Log receives the workload's stdout and stderr: the write end of a
	// pipe the daemon reads into the log (a runtime with a user makes it
	// the user's, so that /dev/stdout opens), or for a FileLogs runtime
	// the log file itself.
	Log *os.File
}

// FileLogs is a driver whose runs write their log file themselves, by
// path (a containerd shim): it gets the log file, not a pipe.
type FileLogs interface {
	WritesLogFile()
}

// Driver starts and adopts workloads of one kind.
type Driver interface {
	Kind() spec.Kind
	// Capabilities says what the supervisor must know of the runtime to
	// prepare its runs.
	Capabilities() Capabilities
	// Start starts one run. It returns once the program is executing, or with
	// the reason it could not be (wrapping ErrExec when retrying cannot help).
	Start(ctx context.Context, t *Task) (Process, error)
	// Recover adopts a run started by an earlier daemon from its persisted
	// state. It returns an error wrapping errdefs.ErrNotFound when that run is
	// no longer alive; a run whose identity no longer matches (a reused pid) is
	// never adopted.
	Recover(ctx context.Context, s State) (Process, error)
}

// Capabilities are what a runtime is, as the supervisor prepares a run
// for it: what differs from kind to kind lives here, not in checks of the
// kind.
type Capabilities struct {
	// RuntimeContext is codefly's CODEFLY__RUNTIME_CONTEXT of its runs:
	// native, nix or container.
	RuntimeContext string
	// ContainerPorts: its runs' hashed ports are codefly's container mode,
	// so that one service run on the host and as a container at once never
	// collide on a host port.
	ContainerPorts bool
	// ImageUser: a run's user lives in its image, not on the host; a
	// command run for it on the host (an exec check) runs as nobody.
	ImageUser bool
}

// Prober is a driver whose runtime can be absent or down while the daemon
// runs (a containerd that starts after flyd, or restarts): Available says
// whether it answers now, with an error wrapping
// errdefs.ErrRuntimeUnavailable when it does not. Meanwhile Recover fails
// with that error too, never with ErrNotFound: a runtime that does not
// answer says nothing about whether a run is alive.
type Prober interface {
	Available(ctx context.Context) error
}

// Forgetter is a driver that keeps something for a workload beyond its
// runs (a Nix environment's GC root): Forget releases it once the
// workload is removed.
type Forgetter interface {
	Forget(ctx context.Context, workload string) error
}

// Sweeper is a driver that keeps state of its own per workload (a
// container, a temporary directory): Sweep removes what belongs to no
// workload in keep. A starting daemon calls it once runs are adopted.
type Sweeper interface {
	Sweep(ctx context.Context, keep map[string]bool) error
}

// VolumeRemover is a driver that keeps named volumes beyond the runs
// that mount them (containerd's). Volumes lists those of a project by
// full name (PROJECT.NAME); RemoveVolumes removes them, never one a run
// still mounts, and returns the names of those it removed. `flyd down
// --volumes` calls it once the project's workloads are gone.
type VolumeRemover interface {
	Volumes(project string) ([]string, error)
	RemoveVolumes(ctx context.Context, project string) ([]string, error)
}

// Process is one live run of a workload.
type Process interface {
	// State is what must be persisted to adopt this run later.
	State() State
	// Done is closed once the run has ended and everything it left behind
	// has been killed.
	Done() <-chan struct{}
	// Exit is valid once Done is closed.
	Exit() Exit
	// Signal delivers sig to every process of the run.
	Signal(sig syscall.Signal) error
	// SignalMain delivers sig to the run's main process alone: a master
	// that shuts its workers down itself (postgres) must be the only one
	// to hear the stop signal.
	SignalMain(sig syscall.Signal) error
	// Kill kills every process of the run, including those that left its
	// process group or session.
	Kill() error
	// Release stops watching the run and leaves it running, for a daemon that
	// exits and lets the next one adopt it.
	Release()
}

// Execer is a Process whose side commands (an exec health check,
// stop.exec, reload.exec, a watch's exec) run inside it, as `docker exec`
// runs them: in the run's namespaces, root and cgroup, as its process's
// user, with its environment, argv[0] found among the image's programs.
// A runtime whose runs have no root of their own does not implement it:
// their side commands run on the host, in the run's network and cgroup.
type Execer interface {
	// Exec runs argv, its output to out, until it exits or ctx ends (it
	// is killed then, and the error is ctx's).
	Exec(ctx context.Context, argv []string, out io.Writer) (Exit, error)
}

// Reaped is a Process whose main process may keep its pid for a while
// after Done: an adopted run is not the daemon's child, and its zombie
// lives until its parent (init) reaps it. A master that checks a pid file
// (postgres's postmaster.pid) takes that zombie for a live predecessor, so
// the next run of the workload waits for Reaped, which is closed once the
// pid is free (or a bound has passed).
type Reaped interface {
	Reaped() <-chan struct{}
}

// Exit is how a run ended.
type Exit struct {
	Code   int       `json:"code"`
	Signal string    `json:"signal,omitempty"`
	At     time.Time `json:"at"`
	// Unknown is set when the run was adopted from an earlier daemon: it was
	// not our child, so its status could not be collected.
	Unknown bool `json:"unknown,omitempty"`
	// Reason says why, when the runtime knows more than the status: the
	// memory limit's OOM kill.
	Reason string `json:"reason,omitempty"`
}

// Success reports a clean exit; an unknown status is not one.
func (e Exit) Success() bool { return !e.Unknown && e.Signal == "" && e.Code == 0 }

func (e Exit) String() string {
	if e.Reason != "" {
		return e.Reason
	}
	switch {
	case e.Unknown:
		return "exit status unknown (adopted)"
	case e.Signal != "":
		return "killed by " + e.Signal
	default:
		return fmt.Sprintf("exit code %d", e.Code)
	}
}

// ErrExec marks a start failure that retrying cannot fix: the program does
// not exist or cannot be executed, the user or workdir is wrong.
var ErrExec = fmt.Errorf("cannot execute")
