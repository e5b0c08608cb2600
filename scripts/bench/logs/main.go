// Command logs measures what a workload's output costs through flyd: the
// MB/s a `yes` workload writes through the daemon's pipe, the same `yes`
// writing to a file of its own (`yes > file`), and `yes` writing its log
// file directly as runs did before pipes (a daemon without a log holder);
// the daemon's CPU per MB logged; and the latency from a line's write to
// its arrival at a `logs -f` follower. It starts its own daemons under
// -dir and removes everything it made. Root only.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/flyd-dev/flyd/api"
	"github.com/flyd-dev/flyd/spec"
)

var (
	daemonBin = flag.String("daemon", "bin/flyd-daemon", "the flyd-daemon program")
	dir       = flag.String("dir", "/var/tmp", "where the logs go (a directory on the disk to measure)")
	secs      = flag.Duration("t", 5*time.Second, "how long each throughput is measured")
	lines     = flag.Int("l", 200, "lines whose latency is measured")
	idle      = flag.Int("n", 0, "idle workloads whose cost is measured (0: none)")
	modes     = flag.String("m", "pipe,file", "the daemons measured, in order: pipe (today's), file (runs writing their files)")
)

func main() {
	flag.Parse()
	root, err := os.MkdirTemp(*dir, "flyd-logbench-")
	check(err)
	defer os.RemoveAll(root)
	fmt.Printf("%-34s %10s %14s\n", "", "MB/s", "daemon CPU s/GB")
	fmt.Printf("%-34s %10.0f %14s\n", "yes > /dev/null", yesTo("/dev/null"), "-")
	check(os.MkdirAll(filepath.Join(root, "plain"), 0o755))
	fmt.Printf("%-34s %10.0f %14s\n", "yes > file", yesTo(filepath.Join(root, "plain", "yes.out")), "-")
	for _, mode := range strings.Split(*modes, ",") {
		d := startDaemon(filepath.Join(root, mode), mode == "file")
		mbs, cpu := d.yes()
		name := "flyd, through the daemon's pipe"
		if mode == "file" {
			name = "flyd, yes writing its file (before)"
		}
		fmt.Printf("%-34s %10.0f %14.2f\n", name, mbs, cpu*1000)
		lat := d.latency()
		fmt.Printf("  write → logs -f, %s: median %.3f ms, p90 %.3f ms, p99 %.3f ms, max %.3f ms\n", mode,
			ms(lat[len(lat)/2]), ms(lat[len(lat)*9/10]), ms(lat[len(lat)*99/100]), ms(lat[len(lat)-1]))
		if *idle > 0 {
			pss, kernel := d.idleCost(*idle)
			fmt.Printf("  %d idle workloads, %s: daemon PSS %.1f KiB and kernel (SUnreclaim) %.1f KiB a workload\n", *idle, mode, pss, kernel)
		}
		d.stop()
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "logs:", err)
		os.Exit(1)
	}
}

// yesTo is the MB/s of `yes > path` over the measured time.
func yesTo(path string) float64 {
	f, err := os.Create(path)
	check(err)
	defer f.Close()
	cmd := exec.Command("yes", "a line of yes")
	cmd.Stdout = f
	check(cmd.Start())
	time.Sleep(time.Second)
	w0 := wchar(cmd.Process.Pid)
	time.Sleep(*secs)
	w1 := wchar(cmd.Process.Pid)
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	return float64(w1-w0) / 1e6 / secs.Seconds()
}

type daemon struct {
	dir    string
	cmd    *exec.Cmd
	client *api.Client
}

// startDaemon starts a daemon in dir; without a holder (its socket's
// place taken by a file) its runs write their log files themselves.
func startDaemon(dir string, noHolder bool) *daemon {
	run := filepath.Join(dir, "run")
	check(os.MkdirAll(run, 0o755))
	if noHolder {
		check(os.WriteFile(filepath.Join(run, "logs.sock"), nil, 0o600))
	}
	sock := filepath.Join(dir, "flyd.sock")
	cmd := exec.Command(*daemonBin, "daemon", "--socket", sock, "--state-dir", filepath.Join(dir, "state"),
		"--run-dir", run, "--registry", "off", "--cgroup-parent", "flyd-logbench-"+strconv.Itoa(os.Getpid()),
		"--workloads-dir", filepath.Join(dir, "workloads.d"), "--log-level", "warn")
	log, err := os.Create(filepath.Join(dir, "daemon.log"))
	check(err)
	cmd.Stdout, cmd.Stderr = log, log
	check(cmd.Start())
	d := &daemon{dir: dir, cmd: cmd, client: api.NewClient(sock)}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := d.client.Status(context.Background()); err == nil {
			return d
		}
		if time.Now().After(deadline) {
			check(fmt.Errorf("the daemon in %s did not answer", dir))
		}
	}
}

func (d *daemon) apply(doc string) *api.Workload {
	ws, err := spec.Parse([]byte(doc))
	check(err)
	w, err := d.client.Apply(context.Background(), ws[0], api.ApplyOptions{Start: true})
	check(err)
	return w
}

func (d *daemon) remove(name string) {
	check(d.client.Remove(context.Background(), name, api.RemoveOptions{}))
}

// yes runs `yes` as a workload and returns the MB/s it wrote and the
// daemon's CPU seconds per MB of it.
func (d *daemon) yes() (mbs, cpuPerMB float64) {
	w := d.apply("name: yes\ncommand: [yes, \"a line of yes\"]\n")
	time.Sleep(time.Second)
	w0, c0 := wchar(w.PID), cpu(d.cmd.Process.Pid)
	time.Sleep(*secs)
	w1, c1 := wchar(w.PID), cpu(d.cmd.Process.Pid)
	d.remove("yes")
	mb := float64(w1-w0) / 1e6
	return mb / secs.Seconds(), (c1 - c0) / mb
}

// latency follows a workload that prints its clock every 20 ms and
// returns, sorted, how long each line took from its write to the
// follower.
func (d *daemon) latency() []time.Duration {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d.apply(`name: clock
command: [python3, -u, -c, "import time\nwhile True:\n  print(time.time_ns(), flush=True)\n  time.sleep(0.02)"]
`)
	defer d.remove("clock")
	var got []time.Duration
	_ = d.client.Logs(ctx, "clock", api.LogQuery{Tail: 0, Follow: true}, api.LogFunc(func(r api.LogRecord) error {
		now := time.Now()
		for _, l := range bytes.Split(bytes.TrimSpace(r.Data), []byte("\n")) {
			if ns, err := strconv.ParseInt(string(l), 10, 64); err == nil {
				got = append(got, now.Sub(time.Unix(0, ns)))
			}
		}
		if len(got) >= *lines {
			cancel()
		}
		return nil
	}))
	sort.Slice(got, func(i, j int) bool { return got[i] < got[j] })
	if len(got) == 0 {
		check(fmt.Errorf("no line followed"))
	}
	return got
}

func (d *daemon) stop() {
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	_ = d.cmd.Wait()
}

// wchar is what the process has written, from /proc/PID/io.
func wchar(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	check(err)
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "wchar: "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}

// cpu is the process's user and system time, in seconds.
func cpu(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	check(err)
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100
}

// idleCost applies n workloads that sleep, printing a line each first,
// and returns what each adds to the daemon's PSS and to the kernel's
// unreclaimable memory, in KiB, once they run.
func (d *daemon) idleCost(n int) (pss, kernel float64) {
	ctx := context.Background()
	script := filepath.Join(d.dir, "idle.sh")
	check(os.WriteFile(script, []byte("echo started\nexec sleep 100000\n"), 0o755))
	var specs []*spec.Workload
	for i := 0; i < n; i++ {
		ws, err := spec.Parse([]byte(fmt.Sprintf("name: idle-%d\ncommand: [/bin/sh, %q]\n", i, script)))
		check(err)
		specs = append(specs, ws[0])
	}
	runtime := func() { time.Sleep(3 * time.Second) }
	runtime()
	p0, k0 := smapsPSS(d.cmd.Process.Pid), unreclaimable()
	_, err := d.client.ApplyBatch(ctx, specs, api.ApplyOptions{Start: true})
	check(err)
	runtime()
	p1, k1 := smapsPSS(d.cmd.Process.Pid), unreclaimable()
	_, err = d.client.Batch(ctx, api.ActionRemove, api.Batch{All: true})
	check(err)
	return float64(p1-p0) / float64(n), float64(k1-k0) / float64(n)
}

func smapsPSS(pid int) int64 { return kib(fmt.Sprintf("/proc/%d/smaps_rollup", pid), "Pss:") }

func unreclaimable() int64 { return kib("/proc/meminfo", "SUnreclaim:") }

// kib reads the first "key N kB" line of file.
func kib(file, key string) int64 {
	b, err := os.ReadFile(file)
	check(err)
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, key); ok {
			n, _ := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
			return n
		}
	}
	return 0
}
