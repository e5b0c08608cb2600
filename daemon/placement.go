package daemon

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
	godbus "github.com/godbus/dbus/v5"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// Where the workloads' cgroups are, on a host that systemd runs on cgroup
// v2: in a transient scope of the daemon's own, <instance>-workloads.scope
// in flyd.slice, which systemd made and delegated to it (Delegate=yes),
// each workload's cgroup a child of the scope. systemd is the one writer
// above the scope and flyd the one below it, as systemd's delegation
// rules ask; `systemctl status PID` of a workload names the scope, and
// `systemd-cgls` shows the workloads in it.
//
// A scope lives as long as a process is inside it, and none of flyd.service's
// processes may be: systemd starts the daemon again in the service's own
// cgroup, which must hold no subtree with controllers (systemd 252 fails
// the start with status=219/CGROUP). So the scope is kept alive by the log
// holder, which outlives every daemon already, in a leaf of the scope
// (holderLeaf); the workloads keep it too while they run. When the holder
// has left and the last workload ended, systemd stops the scope and
// removes its cgroups.
//
// The alternative, a scope per workload, costs a D-Bus round trip and a
// job on every start (126 ms against a spawn's 19 ms, measured under
// emulation in the lane's guest), and systemd can only move a process into
// a new scope once it exists: it would be born outside its cgroup, free to
// fork before the move. In the shared scope a process is born in its
// cgroup (clone3 with CLONE_INTO_CGROUP), and flyd writes its limits.

// workloadsSlice holds the scope of every daemon on the host.
const workloadsSlice = "flyd.slice"

// holderLeaf is the scope's cgroup that holds the log holder: a cgroup
// with processes of its own cannot give its children controllers. No
// workload's cgroup has the name (a workload's is a DNS label, or two
// joined by '_').
const holderLeaf = "_log-holder"

// placement is the daemon's scope under systemd.
type placement struct {
	unit   string // <instance>-workloads.scope
	parent string // the scope's cgroup from the hierarchy's root
	dir    string // and its directory
	log    *zap.Logger
	// off is set when the daemon could not place its workloads in the
	// scope and uses the hierarchy's root instead: a holder started
	// later is then left where it is born.
	off atomic.Bool
}

// scopeUnit is the scope of the daemon named inst (internal/instance).
func scopeUnit(inst string) string { return inst + "-workloads.scope" }

// systemdPlacement is the daemon's scope when systemd runs this host on
// the unified cgroup v2 hierarchy and answers on the system bus; nil
// otherwise (no systemd, a v1 or hybrid host, a container), where the
// workloads' cgroups are under --cgroup-parent from the root as before.
func systemdPlacement(ctx context.Context, inst string, log *zap.Logger) *placement {
	if fi, err := os.Stat("/run/systemd/system"); err != nil || !fi.IsDir() {
		return nil
	}
	var st unix.Statfs_t
	if err := unix.Statfs("/sys/fs/cgroup", &st); err != nil || st.Type != unix.CGROUP2_SUPER_MAGIC {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := systemdBus(ctx)
	if err != nil {
		log.Warn("systemd runs this host, but its system bus does not answer: the workloads' cgroups are under --cgroup-parent from the hierarchy's root", zap.Error(err))
		return nil
	}
	conn.Close()
	unit := scopeUnit(inst)
	parent := workloadsSlice + "/" + unit
	return &placement{unit: unit, parent: parent, dir: filepath.Join("/sys/fs/cgroup", parent), log: log}
}

// systemdBus connects to systemd on the system bus; the connection is
// closed when ctx is done.
func systemdBus(ctx context.Context) (*sddbus.Conn, error) {
	return sddbus.NewSystemConnectionContext(ctx)
}

// leaf is the holder's cgroup in the scope, for a holder to be born in;
// "" when the daemon does not use the scope or it is not there.
func (p *placement) leaf() string {
	if p == nil || p.off.Load() {
		return ""
	}
	d := filepath.Join(p.dir, holderLeaf)
	if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
		return ""
	}
	return d
}

// keep makes sure the scope is there, with the holder pid in its leaf:
// when systemd has no such scope running, it asks for one holding pid
// and says so (made), for the daemon to give the new scope's children
// their controllers again.
func (p *placement) keep(ctx context.Context, pid int) (made bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := systemdBus(ctx)
	if err != nil {
		return false, fmt.Errorf("systemd's bus: %w", err)
	}
	defer conn.Close()
	for try := 0; ; try++ {
		state, err := unitState(ctx, conn, p.unit)
		if err != nil {
			return false, err
		}
		if state == "active" {
			break
		}
		if state == "failed" {
			_ = conn.ResetFailedUnitContext(ctx, p.unit)
		}
		// A scope that is going (its last process gone a moment ago) is
		// waited for, and made anew.
		err = p.start(ctx, conn, pid)
		if err == nil {
			made = true
			break
		}
		if try == 20 || ctx.Err() != nil {
			return false, err
		}
		time.Sleep(100 * time.Millisecond)
	}
	leaf := filepath.Join(p.dir, holderLeaf)
	if err := os.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return made, fmt.Errorf("the log holder's cgroup in %s: %w", p.unit, err)
	}
	if cg, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid)); err == nil && strings.TrimSpace(string(cg)) == "0::/"+p.parent+"/"+holderLeaf {
		return made, nil
	}
	if err := os.WriteFile(filepath.Join(leaf, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
		return made, fmt.Errorf("move the log holder (pid %d) into %s: %w", pid, leaf, err)
	}
	return made, nil
}

// start asks systemd for the scope, delegated, holding pid.
func (p *placement) start(ctx context.Context, conn *sddbus.Conn, pid int) error {
	props := []sddbus.Property{
		sddbus.PropDescription("flyd's workloads"),
		sddbus.PropSlice(workloadsSlice),
		{Name: "Delegate", Value: godbus.MakeVariant(true)},
		sddbus.PropPids(uint32(pid)),
	}
	done := make(chan string, 1)
	if _, err := conn.StartTransientUnitContext(ctx, p.unit, "fail", props, done); err != nil {
		return fmt.Errorf("start %s: %w", p.unit, err)
	}
	select {
	case r := <-done:
		if r != "done" {
			return fmt.Errorf("start %s: the job ended %s", p.unit, r)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("start %s: %w", p.unit, ctx.Err())
	}
}

func unitState(ctx context.Context, conn *sddbus.Conn, unit string) (string, error) {
	prop, err := conn.GetUnitPropertyContext(ctx, unit, "ActiveState")
	if err != nil {
		return "", fmt.Errorf("%s's state: %w", unit, err)
	}
	s, _ := prop.Value.Value().(string)
	return s, nil
}
