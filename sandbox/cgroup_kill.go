package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/flyd-dev/flyd/errdefs"
)

const (
	// freezeWait bounds the wait for a freeze: a task in uninterruptible
	// sleep never freezes, and then the kill goes ahead without the freeze
	// and the next round catches what it forked meanwhile.
	freezeWait = 100 * time.Millisecond
	// killRound is how long a kill waits for the cgroup to empty before
	// sending SIGKILL again.
	killRound = 250 * time.Millisecond
)

// Procs lists the processes in the cgroup, sorted. Zombies are not
// listed: they have left the cgroup, waiting only to be reaped. An error
// wraps errdefs.ErrNotFound if the cgroup does not exist.
func (g *Cgroup) Procs() ([]int, error) {
	pids, err := readInts(filepath.Join(g.Path, "cgroup.procs"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("cgroup %q does not exist: %w", g.Name, errdefs.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("list processes of cgroup %q: %w", g.Name, err)
	}
	pids = withoutSelf(pids)
	slices.Sort(pids)
	return pids, nil
}

// Contains reports whether process p is in the cgroup (in the primary
// hierarchy on v1), as /proc/p/cgroup says: with the process's start
// time, what tells a surviving workload from a reused pid.
func (g *Cgroup) Contains(p int) bool {
	paths, err := procCgroups("/proc/"+strconv.Itoa(p)+"/cgroup", g.cg.l)
	return err == nil && paths[0] == g.CgroupsPath()
}

// Signal sends sig to every process in the cgroup, for a graceful stop.
// A process that exits meanwhile is not an error, nor is a missing cgroup.
func (g *Cgroup) Signal(sig syscall.Signal) error {
	pids, err := g.Procs()
	if errors.Is(err, errdefs.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, p := range pids {
		if err := unix.Kill(p, sig); err != nil && !errors.Is(err, unix.ESRCH) {
			errs = append(errs, fmt.Errorf("signal process %d of cgroup %q: %w", p, g.Name, err))
		}
	}
	return errors.Join(errs...)
}

// Kill SIGKILLs every process in the cgroup, including any forked while it
// runs, and returns once the cgroup is empty. It freezes the cgroup, so
// that nothing forks between reading the list and signalling it, kills
// the list and thaws, and repeats until the cgroup is empty or ctx ends: a
// process in uninterruptible sleep neither freezes nor dies until it
// wakes. An empty or missing cgroup returns at once.
//
// It does not write v2's cgroup.kill, though that is one race-free write:
// kernels that count kills in a per-cgroup kill_seq (6.18 here) compare
// the target cgroup's count with the forking thread's own cgroup's when a
// child is cloned with CLONE_INTO_CGROUP, so once cgroup.kill was written
// to a cgroup, every child later started into it is SIGKILLed at birth.
// A workload could never restart in its cgroup. TestStartAfterKill guards
// this.
func (g *Cgroup) Kill(ctx context.Context) error {
	unlock := lockCgroup(g.Path, true)
	defer unlock()
	for {
		pids, err := g.Procs()
		if errors.Is(err, errdefs.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if len(pids) == 0 {
			return nil
		}
		if err := g.freezeAndKill(ctx); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("kill cgroup %q: %w", g.Name, err)
		}
		if g.waitEmpty(ctx, killRound) {
			return nil
		}
		if ctx.Err() != nil {
			left, _ := g.Procs()
			return fmt.Errorf("kill cgroup %q: %d processes still inside: %w", g.Name, len(left), ctx.Err())
		}
	}
}

// freezeAndKill is one round of Kill. It always thaws: a frozen task dies
// of SIGKILL at once on v2 and as it thaws on v1, before it runs another
// instruction of its own either way.
func (g *Cgroup) freezeAndKill(ctx context.Context) error {
	// A failed freeze still leaves the kill worth doing: the next round
	// catches what forks meanwhile.
	frozen, ferr := g.setFrozen(ctx, true)
	pids, err := g.Procs()
	err = errors.Join(ferr, err)
	for _, p := range pids {
		if kerr := unix.Kill(p, unix.SIGKILL); kerr != nil && !errors.Is(kerr, unix.ESRCH) {
			err = errors.Join(err, fmt.Errorf("kill process %d: %w", p, kerr))
		}
	}
	if frozen {
		if _, terr := g.setFrozen(ctx, false); terr != nil {
			err = errors.Join(err, terr)
		}
	}
	return err
}

// setFrozen freezes or thaws the cgroup, and when freezing waits up to
// freezeWait for every task to stop. It reports false, without error,
// where there is no freezer.
func (g *Cgroup) setFrozen(ctx context.Context, freeze bool) (bool, error) {
	var file, value, doneFile string
	var done func([]byte) bool
	if g.cg.l.version == 1 {
		d := g.dirFor("freezer")
		if d == "" {
			return false, nil
		}
		file, value, doneFile = filepath.Join(d, "freezer.state"), "THAWED", filepath.Join(d, "freezer.state")
		if freeze {
			value = "FROZEN"
		}
		done = func(b []byte) bool { return strings.TrimSpace(string(b)) == value }
	} else {
		file, value, doneFile = filepath.Join(g.Path, "cgroup.freeze"), "0", filepath.Join(g.Path, "cgroup.events")
		if freeze {
			value = "1"
		}
		done = func(b []byte) bool { return strings.Contains(string(b), "\nfrozen "+value) }
	}
	if err := writeCgroupFile(file, value); errors.Is(err, fs.ErrNotExist) && g.cg.l.version == 2 {
		return false, nil // before Linux 5.2, or the cgroup is gone
	} else if err != nil {
		return false, err
	}
	if !freeze {
		return false, nil
	}
	deadline := time.Now().Add(freezeWait)
	for wait := 100 * time.Microsecond; time.Now().Before(deadline) && ctx.Err() == nil; wait = min(2*wait, 10*time.Millisecond) {
		b, err := readFile(doneFile)
		if err != nil || done(b) {
			break
		}
		time.Sleep(wait)
	}
	return true, nil
}

// waitEmpty polls until the cgroup has no process, for at most d or until
// ctx ends, and reports whether it emptied.
func (g *Cgroup) waitEmpty(ctx context.Context, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for wait := 200 * time.Microsecond; ; wait = min(2*wait, 20*time.Millisecond) {
		pids, err := g.Procs()
		if errors.Is(err, errdefs.ErrNotFound) || (err == nil && len(pids) == 0) {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-timer.C:
			return false
		case <-time.After(wait):
		}
	}
}

// OOMKills counts the processes the kernel's OOM killer killed in the
// cgroup because of its memory limit, so that the daemon can say why a
// workload died. It is 0 where there is no memory controller, so no limit,
// and on v1 for a cgroup without a memory limit, which is not made in the
// memory hierarchy.
func (g *Cgroup) OOMKills() (int, error) {
	return g.counter("memory", "memory.events", "memory.oom_control", "oom_kill", "OOM kills", "Linux 4.13")
}

// PidsRefusals counts the forks the pids limit refused in the cgroup. It
// is 0 where there is no pids controller for the cgroup, so no limit.
func (g *Cgroup) PidsRefusals() (int, error) {
	return g.counter("pids", "pids.events", "pids.events", "max", "pids refusals", "Linux 4.3")
}

// counter reads the count key of a controller's keyed file (file on v2,
// v1file in the controller's hierarchy on v1); since is the first kernel
// that counts it.
func (g *Cgroup) counter(ctrl, file, v1file, key, what, since string) (int, error) {
	if !slices.Contains(g.cg.ctrls, ctrl) || g.dirFor(ctrl) == "" {
		return 0, nil
	}
	path := filepath.Join(g.Path, file)
	if g.cg.l.version == 1 {
		path = filepath.Join(g.dirFor(ctrl), v1file)
	}
	n, ok, err := readKeyed(path, key)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, fmt.Errorf("cgroup %q does not exist: %w", g.Name, errdefs.ErrNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("read %s of cgroup %q: %w", what, g.Name, err)
	}
	if !ok {
		return 0, fmt.Errorf("read %s of cgroup %q: this kernel does not count them (%s does): %w", what, g.Name, since, errdefs.ErrNotImplemented)
	}
	return int(n), nil
}
