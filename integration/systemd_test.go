package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/flyd-dev/flyd/api"
)

// systemdLane is the variable scripts/test-systemd sets in its guest, a
// throw-away host that systemd boots on cgroup v2: the scenario below
// installs flyd into the host's own /usr/local, /etc and systemd there.
const systemdLane = "FLYD_SYSTEMD_LANE"

// TestSystemdHost installs flyd the way a user does on a systemd host and
// checks what only a real systemd as PID 1 on cgroup v2 shows: the unit is
// active once the daemon said READY=1, the socket's mode and group, the v2
// limit files and the OOM report, workloads kept with their pid across
// `systemctl restart` and `stop`+`start`, the journal, and an uninstall
// that leaves nothing, cgroups included.
func TestSystemdHost(t *testing.T) {
	if os.Getenv(systemdLane) != "1" {
		// Not a hole in CI: scripts/test-systemd runs it, where it can.
		t.Skipf("changes this host's systemd units, /etc/flyd and /var/lib/flyd: runs only in scripts/test-systemd's guest (%s=1)", systemdLane)
	}
	requireRoot(t)
	if comm, _ := os.ReadFile("/proc/1/comm"); strings.TrimSpace(string(comm)) != "systemd" {
		t.Fatalf("%s=1, but PID 1 is %q, not systemd", systemdLane, bytes.TrimSpace(comm))
	}
	var fs unix.Statfs_t
	if err := unix.Statfs("/sys/fs/cgroup", &fs); err != nil || fs.Type != unix.CGROUP2_SUPER_MAGIC {
		t.Fatalf("%s=1, but /sys/fs/cgroup is not the unified cgroup v2 hierarchy (%v)", systemdLane, err)
	}
	const socket = api.DefaultSocket
	t.Cleanup(func() { _, _ = exec.Command(uninstallFile, "--purge").CombinedOutput() })

	t.Log(runScript(t, installScript, scriptEnv("FLYD_BIN="+flydBin)))
	if got := systemctlShow(t, "Type"); got != "notify" {
		t.Fatalf("flyd.service Type=%s, want notify", got)
	}
	checkReadyBeforeActive(t, socket)

	fi, err := os.Stat(socket)
	if err != nil {
		t.Fatal(err)
	}
	grp, err := user.LookupGroup("flyd")
	if err != nil {
		t.Fatal(err)
	}
	if gid := strconv.Itoa(int(fi.Sys().(*syscall.Stat_t).Gid)); fi.Mode().Perm() != 0o660 || gid != grp.Gid {
		t.Errorf("%s: mode %v, gid %s; want 0660 and the group flyd (%s)", socket, fi.Mode().Perm(), gid, grp.Gid)
	}

	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	prog := filepath.Join(dir, "testprog")
	copyFile(t, progBin, prog)
	checkUpgradeKeepsEarlierPlacement(t, socket, prog)

	// Workloads: one with every limit, one that outgrows its memory.
	limited := "name: limited\ncommand: [\"" + prog + "\", serve, \"127.0.0.1:0\"]\nresources: {memory_max: 96Mi, pids_max: 32, cpu_max: 0.5}\n"
	hog := "name: hog\ncommand: [\"" + prog + "\", hog]\nresources: {memory_max: 64Mi}\nrestart: {policy: never}\n"
	for name, text := range map[string]string{"limited.yaml": limited, "hog.yaml": hog} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		systemdCLI(t, socket, "apply", "-f", path)
	}
	c := api.NewClient(socket)
	defer c.Close()
	w := waitUnit(t, c, "limited", func(w *api.Workload) bool { return w.State == api.StateRunning && w.PID > 0 })
	// In the daemon's scope, which systemd delegated to it (see
	// docs/daemon.md, "Where the cgroups are"): systemd names the unit of
	// each workload and shows it in its tree, and the unit's own cgroup
	// holds the daemon alone.
	cg := processCgroup(t, w.PID)
	if want := "/" + workloadsScopeDir + "/limited"; cg != want {
		t.Errorf("limited runs in cgroup %s, want %s", cg, want)
	}
	checkScope(t, w.PID)
	checkUnitHoldsDaemonOnly(t)
	checkLimits(t, cg)
	h := waitUnit(t, c, "hog", func(w *api.Workload) bool { return w.State == api.StateExited })
	if h.LastExit == nil || h.LastExit.Signal != "SIGKILL" || !strings.Contains(h.LastExit.Reason, "memory") {
		t.Errorf("hog's last exit %+v, want SIGKILL by the memory limit", h.LastExit)
	}

	// The daemon goes and comes back; the workload stays, with its pid.
	pid := w.PID
	for _, how := range [][]string{{"restart"}, {"stop", "start"}} {
		daemonPID := systemctlShow(t, "MainPID")
		for _, verb := range how {
			systemctl(t, verb, "flyd")
			if verb == "stop" {
				// Without a daemon, and whatever systemd makes of the
				// tree meanwhile, the workload runs on within its limits.
				if !alive(pid) {
					t.Fatalf("systemctl stop flyd ended the workload %d", pid)
				}
				checkLimits(t, cg)
			}
		}
		checkReadyBeforeActive(t, socket)
		if now := systemctlShow(t, "MainPID"); now == daemonPID {
			t.Fatalf("systemctl %s: the daemon is still pid %s", strings.Join(how, "+"), now)
		}
		w := waitUnit(t, c, "limited", func(w *api.Workload) bool { return w.State == api.StateRunning })
		if w.PID != pid {
			t.Fatalf("after systemctl %s: limited has pid %d, want %d (adopted)", strings.Join(how, "+"), w.PID, pid)
		}
		checkScope(t, pid)
		checkUnitHoldsDaemonOnly(t)
		checkLimits(t, cg)
	}

	systemdCLI(t, socket, "rm", "limited", "hog")
	if alive(pid) {
		t.Errorf("flyd rm left the workload's process %d", pid)
	}
	if _, err := os.Stat(filepath.Join("/sys/fs/cgroup", cg)); err == nil {
		t.Errorf("flyd rm left the cgroup %s", cg)
	}

	journal, err := exec.Command("journalctl", "-u", "flyd", "-o", "cat", "--no-pager").CombinedOutput()
	if err != nil || !bytes.Contains(journal, []byte(`"msg":"flyd daemon ready"`)) {
		t.Errorf("journalctl -u flyd (%v) has no line of the daemon's saying it is ready:\n%s", err, journal)
	}
	// No trouble of the daemon's own: a warning about a workload (hog's OOM
	// kill) is a report, and names it.
	for _, line := range bytes.Split(journal, []byte("\n")) {
		var e struct{ Level, Msg, Workload string }
		if json.Unmarshal(line, &e) == nil && (e.Level == "error" || e.Level == "warn" && e.Workload == "") {
			t.Errorf("the daemon logged: %s", line)
		}
	}

	t.Log(runScript(t, uninstallFile, scriptEnv(), "--purge"))
	for _, p := range []string{"/usr/local/bin/flyd", "/usr/local/libexec/flyd", "/etc/systemd/system/flyd.service", "/etc/flyd", "/var/lib/flyd", "/run/flyd",
		"/sys/fs/cgroup/system.slice/flyd.service", "/sys/fs/cgroup/flyd", "/sys/fs/cgroup/flyd.slice"} {
		mustExist(t, p, false)
	}
	for _, unit := range []string{workloadsScope, "flyd.slice"} {
		if out, _ := exec.Command("systemctl", "show", "-P", "ActiveState", unit).Output(); strings.TrimSpace(string(out)) != "inactive" {
			t.Errorf("after uninstall --purge %s is %s, want inactive (gone)", unit, bytes.TrimSpace(out))
		}
	}
	if out, _ := exec.Command("systemctl", "list-units", "--all", "--no-legend", "--plain", "flyd*").Output(); len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("after uninstall --purge systemd still lists:\n%s", out)
	}
	if _, err := user.LookupGroup("flyd"); err == nil {
		t.Error("the group flyd is still there after uninstall --purge")
	}
	if out, err := exec.Command("systemctl", "cat", "flyd.service").CombinedOutput(); err == nil {
		t.Errorf("systemd still knows flyd.service after uninstall --purge:\n%s", out)
	}
}

// checkUpgradeKeepsEarlierPlacement: an install whose workloads run where
// an older flyd put them, at /sys/fs/cgroup/flyd/NAME (as --cgroup-parent
// flyd still does), is upgraded in place: the daemon, restarted without
// --cgroup-parent, adopts them there with their pids and keeps the parent
// while they run; the first daemon to start with none running there
// removes it and uses its scope.
func checkUpgradeKeepsEarlierPlacement(t *testing.T, socket, prog string) {
	dropIn := "/etc/systemd/system/flyd.service.d"
	if err := os.MkdirAll(dropIn, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dropIn); _ = exec.Command("systemctl", "daemon-reload").Run() })
	conf := "[Service]\nExecStart=\nExecStart=/usr/local/bin/flyd daemon --cgroup-parent flyd\n"
	if err := os.WriteFile(filepath.Join(dropIn, "earlier.conf"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	systemctl(t, "daemon-reload")
	systemctl(t, "restart", "flyd")
	checkReadyBeforeActive(t, socket)
	spec := filepath.Join(filepath.Dir(prog), "earlier.yaml")
	if err := os.WriteFile(spec, []byte("name: earlier\ncommand: [\""+prog+"\", serve, \"127.0.0.1:0\"]\nresources: {memory_max: 96Mi, pids_max: 32, cpu_max: 0.5}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	systemdCLI(t, socket, "apply", "-f", spec)
	c := api.NewClient(socket)
	defer c.Close()
	w := waitUnit(t, c, "earlier", func(w *api.Workload) bool { return w.State == api.StateRunning && w.PID > 0 })
	const earlierCg = "/flyd/earlier"
	if cg := processCgroup(t, w.PID); cg != earlierCg {
		t.Fatalf("with --cgroup-parent flyd, earlier runs in %s, want %s", cg, earlierCg)
	}

	// The upgrade: the unit as installed, no --cgroup-parent.
	if err := os.RemoveAll(dropIn); err != nil {
		t.Fatal(err)
	}
	systemctl(t, "daemon-reload")
	systemctl(t, "restart", "flyd")
	checkReadyBeforeActive(t, socket)
	a := waitUnit(t, c, "earlier", func(w *api.Workload) bool { return w.State == api.StateRunning })
	if a.PID != w.PID {
		t.Fatalf("after the upgrade earlier has pid %d, want %d (adopted where it runs)", a.PID, w.PID)
	}
	if cg := processCgroup(t, a.PID); cg != earlierCg {
		t.Errorf("after the upgrade earlier runs in %s, want %s (kept)", cg, earlierCg)
	}
	checkLimits(t, earlierCg)
	systemdCLI(t, socket, "rm", "earlier")
	if alive(w.PID) {
		t.Fatalf("flyd rm left earlier's process %d", w.PID)
	}
	systemctl(t, "restart", "flyd")
	checkReadyBeforeActive(t, socket)
	mustExist(t, "/sys/fs/cgroup/flyd", false)
}

// The installed daemon's scope: its workloads' cgroups are its children.
const (
	workloadsScope    = "flyd-workloads.scope"
	workloadsScopeDir = "flyd.slice/" + workloadsScope
)

// checkScope: systemd knows the workload pid by its scope, delegated, in
// flyd.slice; systemd-cgls shows it there; and the scope's own processes
// are the log holder's alone, in its leaf.
func checkScope(t *testing.T, pid int) {
	t.Helper()
	out, _ := exec.Command("systemctl", "status", "--no-pager", "-n0", strconv.Itoa(pid)).Output()
	if first, _, _ := strings.Cut(string(out), "\n"); !strings.Contains(first, workloadsScope) {
		t.Errorf("systemctl status %d names no %s:\n%s", pid, workloadsScope, out)
	}
	for prop, want := range map[string]string{"Delegate": "yes", "Slice": "flyd.slice", "ActiveState": "active"} {
		out, err := exec.Command("systemctl", "show", "-P", prop, workloadsScope).Output()
		if got := strings.TrimSpace(string(out)); err != nil || got != want {
			t.Errorf("%s: %s=%s (%v), want %s", workloadsScope, prop, got, err, want)
		}
	}
	out, err := exec.Command("systemd-cgls", "--no-pager", "-u", "flyd.slice").CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte(workloadsScope)) || !regexp.MustCompile(`(?m)^\W*`+strconv.Itoa(pid)+` `).Match(out) {
		t.Errorf("systemd-cgls -u flyd.slice (%v) does not show %s holding %d:\n%s", err, workloadsScope, pid, out)
	}
	if procs := strings.Fields(mustRead(t, filepath.Join("/sys/fs/cgroup", workloadsScopeDir, "cgroup.procs"))); len(procs) > 0 {
		t.Errorf("%s's own cgroup holds processes %v: they belong in leaves", workloadsScope, procs)
	}
	for _, p := range strings.Fields(mustRead(t, filepath.Join("/sys/fs/cgroup", workloadsScopeDir, "_log-holder", "cgroup.procs"))) {
		if cmdline, _ := os.ReadFile("/proc/" + p + "/cmdline"); !strings.Contains(string(cmdline), "/flyd-log-holder\x00--socket\x00") {
			t.Errorf("the scope's leaf of the log holder holds pid %s (%q)", p, cmdline)
		}
	}
}

// checkLimits: the v2 limit files of the workload "limited".
func checkLimits(t *testing.T, cg string) {
	t.Helper()
	for _, f := range []struct{ file, want string }{{"memory.max", "100663296"}, {"pids.max", "32"}, {"cpu.max", "50000 100000"}} {
		b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup", cg, f.file))
		if got := strings.TrimSpace(string(b)); err != nil || got != f.want {
			t.Errorf("%s/%s: %q (%v), want %q", cg, f.file, got, err, f.want)
		}
	}
}

// checkUnitHoldsDaemonOnly: systemd's cgroup of flyd.service, and every
// cgroup below it, holds the daemon's process and nothing else (the log
// holder keeps the workloads' scope), so that what systemd does to the
// unit never reaches a workload or the holder.
func checkUnitHoldsDaemonOnly(t *testing.T) {
	t.Helper()
	main := systemctlShow(t, "MainPID")
	var procs []string
	_ = filepath.WalkDir("/sys/fs/cgroup/system.slice/flyd.service", func(p string, e os.DirEntry, err error) error {
		if err == nil && e.Name() == "cgroup.procs" {
			procs = append(procs, strings.Fields(mustRead(t, p))...)
		}
		return nil
	})
	daemon := false
	for _, pid := range procs {
		cmdline, _ := os.ReadFile("/proc/" + pid + "/cmdline")
		switch {
		case pid == main:
			daemon = true
		default:
			t.Errorf("flyd.service's cgroup holds pid %s (%q), not the daemon (%s)", pid, cmdline, main)
		}
	}
	if !daemon {
		t.Errorf("flyd.service's cgroup holds processes %v, not the daemon's %s", procs, main)
	}
}

// checkReadyBeforeActive: when systemctl start (or restart) has returned,
// the socket answers at once, and systemd entered active no earlier than
// the daemon logged that it was ready, just before sending READY=1.
func checkReadyBeforeActive(t *testing.T, socket string) {
	t.Helper()
	c := api.NewClient(socket)
	defer c.Close()
	st, err := c.Status(t.Context())
	if err != nil {
		t.Fatalf("flyd.service is %s but its socket does not answer: %v", systemctlShow(t, "ActiveState"), err)
	}
	if main := systemctlShow(t, "MainPID"); main != strconv.Itoa(st.PID) {
		t.Fatalf("the socket is answered by pid %d, the unit's main pid is %s", st.PID, main)
	}
	active, err := strconv.ParseInt(systemctlShow(t, "ActiveEnterTimestampMonotonic"), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("journalctl", "-u", "flyd", "-o", "json", "--no-pager", "_PID="+strconv.Itoa(st.PID)).Output()
	if err != nil {
		t.Fatalf("journalctl: %v", err)
	}
	for _, line := range bytes.Split(out, []byte("\n")) {
		var e struct {
			Message   string `json:"MESSAGE"`
			Monotonic string `json:"__MONOTONIC_TIMESTAMP"`
		}
		if json.Unmarshal(line, &e) != nil || !strings.Contains(e.Message, `"flyd daemon ready"`) {
			continue
		}
		ready, _ := strconv.ParseInt(e.Monotonic, 10, 64)
		// journald dates a line when it reads it from the daemon's stderr,
		// which can trail systemd's handling of the READY=1 sent after it
		// (1.4 ms was seen under emulation). A unit active before the
		// daemon is ready is active from its exec, half a second earlier.
		const journalLag = 50_000 // µs
		if active < ready-journalLag {
			t.Fatalf("flyd.service became active at %d µs, before the daemon was ready at %d µs", active, ready)
		}
		t.Logf("ready at %d µs, active at %d µs", ready, active)
		return
	}
	t.Fatalf("the journal has no ready line of pid %d:\n%s", st.PID, out)
}

func systemctl(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("systemctl", args...).CombinedOutput(); err != nil {
		st, _ := exec.Command("systemctl", "status", "--no-pager", "-l", "flyd").CombinedOutput()
		t.Fatalf("systemctl %s: %v\n%s\n%s", strings.Join(args, " "), err, out, st)
	}
}

func systemctlShow(t *testing.T, prop string) string {
	t.Helper()
	out, err := exec.Command("systemctl", "show", "-P", prop, "flyd.service").Output()
	if err != nil {
		t.Fatalf("systemctl show -P %s flyd.service: %v", prop, err)
	}
	return strings.TrimSpace(string(out))
}

// systemdCLI runs the CLI against the installed daemon.
func systemdCLI(t *testing.T, socket string, args ...string) string {
	t.Helper()
	out, errOut, code := runCLI(t, socket, args...)
	if code != 0 {
		t.Fatalf("flyd %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

func waitUnit(t *testing.T, c *api.Client, name string, ok func(*api.Workload) bool) *api.Workload {
	t.Helper()
	var w *api.Workload
	eventually(t, name+"'s state", func() error {
		var err error
		if w, err = c.Get(t.Context(), name); err != nil {
			return err
		}
		if !ok(w) {
			return fmt.Errorf("%s, pid %d, last exit %+v", w.State, w.PID, w.LastExit)
		}
		return nil
	})
	return w
}

// processCgroup is pid's cgroup v2 path, as /proc/PID/cgroup says.
func processCgroup(t *testing.T, pid int) string {
	t.Helper()
	b := mustRead(t, fmt.Sprintf("/proc/%d/cgroup", pid))
	p, ok := strings.CutPrefix(strings.TrimSpace(b), "0::")
	if !ok {
		t.Fatalf("/proc/%d/cgroup: %q, want one v2 line", pid, b)
	}
	return p
}
