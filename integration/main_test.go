// Package integration runs a real `flyd daemon` and drives it the way users
// do: through the CLI binary, the Go client and raw HTTP on its socket. The
// workloads are the small program in ./testprog.
//
// The tests need root (workloads run as other users, peer credentials are
// checked). Without root they skip, except under CI=true where a skip would
// hide a broken setup, so it fails instead. FLYD_TEST_RACE=1 builds the
// daemon with the race detector (and cgo).
package integration

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flyd-dev/flyd/api"
	"github.com/flyd-dev/flyd/internal/testenv"
)

// Built once by TestMain.
var (
	flydBin string // the flyd binary: daemon and CLI
	progBin string // testprog; each test runs its own copy (see startDaemon)
	// notRoot is why the tests cannot run, if they cannot.
	notRoot string
)

// waitFor bounds every wait for a state change: 10 s, times
// FLYD_TEST_TIME_SCALE on a machine that is that many times slower (an
// emulated guest: scripts/test-systemd).
var waitFor = 10 * time.Second * time.Duration(timeScale())

func timeScale() int {
	n, err := strconv.Atoi(os.Getenv("FLYD_TEST_TIME_SCALE"))
	if err != nil || n < 1 {
		return 1
	}
	return n
}

func TestMain(m *testing.M) {
	flag.Parse()
	// Most of the time is spent waiting for processes, not computing, so a
	// few more tests than cores may run side by side; more would make the
	// suite flaky on a small machine.
	parallelSet := false
	flag.Visit(func(f *flag.Flag) { parallelSet = parallelSet || f.Name == "test.parallel" })
	if !parallelSet {
		_ = flag.Set("test.parallel", "4")
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if os.Geteuid() != 0 {
		notRoot = "the integration tests need root: flyd runs workloads as other users and checks socket peers' credentials"
		return m.Run() // every test skips (or fails under CI=true) with this reason
	}
	dir, err := os.MkdirTemp("", "flyd-integration-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	// Workloads running as nobody execute testprog, and the CLI runs as
	// nobody in the access tests.
	if err := os.Chmod(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := build(dir); err != nil {
		fmt.Fprintln(os.Stderr, "building flyd and testprog:", err)
		return 1
	}
	flydBin, progBin = filepath.Join(dir, "flyd"), filepath.Join(dir, "testprog")
	return m.Run()
}

func build(dir string) error {
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		return err
	}
	args := []string{"build", "-o", dir + "/"}
	env := append(os.Environ(), "CGO_ENABLED=0")
	if os.Getenv("FLYD_TEST_RACE") == "1" {
		// The daemon with the race detector: a race makes it exit 66 and
		// print the report in its log, which a failed test shows.
		args = append(args, "-race")
		env = append(env, "CGO_ENABLED=1")
	}
	cmd := exec.Command(goBin, append(args, "./cmd/flyd", "./cmd/flyd-daemon", "./cmd/flyd-log-holder", "./cmd/flyd-compose", "./integration/testprog")...)
	cmd.Dir = root
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%w\n%s", err, out)
	}
	return nil
}

// requireRoot skips the test without root, or fails it under CI=true.
func requireRoot(t *testing.T) {
	t.Helper()
	if notRoot != "" {
		testenv.Skip(t, notRoot)
	}
}

// daemon is one `flyd daemon` process of a test.
type daemon struct {
	t        *testing.T
	dir      string // holds the socket, the state and run dirs, the logs and prog
	socket   string
	stateDir string
	runDir   string
	prog     string // this test's copy of testprog: its path names the test's processes
	logPath  string // the daemon's stderr: its JSON log
	cmd      *exec.Cmd
	done     chan struct{}
	client   *api.Client
}

type daemonOptions struct {
	dir   string
	args  []string
	env   []string
	files []*os.File
}

type option func(*daemonOptions)

// inDir starts the daemon on the paths of an earlier one: it finds that
// one's workloads.
func inDir(dir string) option { return func(o *daemonOptions) { o.dir = dir } }

// withArgs adds daemon flags.
func withArgs(args ...string) option {
	return func(o *daemonOptions) { o.args = append(o.args, args...) }
}

// withEnv adds KEY=VALUE entries to the daemon's environment.
func withEnv(kv ...string) option { return func(o *daemonOptions) { o.env = append(o.env, kv...) } }

// withFiles passes open descriptors to the daemon, from fd 3 on, as a
// shell or a CI runner may.
func withFiles(f ...*os.File) option {
	return func(o *daemonOptions) { o.files = append(o.files, f...) }
}

// startDaemon starts a daemon in the background and returns once its API
// answers. Cleanup removes every workload, stops the daemon, and fails the
// test if any process of the test's workloads is still running.
func startDaemon(t *testing.T, opts ...option) *daemon {
	t.Helper()
	requireRoot(t)
	var o daemonOptions
	for _, f := range opts {
		f(&o)
	}
	if o.dir == "" {
		o.dir = t.TempDir()
		// t.TempDir makes /tmp/TestX123/001, both 0700: workloads that run
		// as nobody need to reach their program and the socket.
		for _, p := range []string{o.dir, filepath.Dir(o.dir)} {
			if err := os.Chmod(p, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	d := &daemon{
		t:        t,
		dir:      o.dir,
		socket:   filepath.Join(o.dir, "flyd.sock"),
		stateDir: filepath.Join(o.dir, "state"),
		runDir:   filepath.Join(o.dir, "run"),
		prog:     filepath.Join(o.dir, "testprog"),
		done:     make(chan struct{}),
	}
	if _, err := os.Stat(d.prog); errors.Is(err, os.ErrNotExist) {
		copyFile(t, progBin, d.prog)
	}
	n, _ := filepath.Glob(filepath.Join(d.dir, "daemon-*.log"))
	d.logPath = filepath.Join(d.dir, fmt.Sprintf("daemon-%d.log", len(n)+1))
	logFile, err := os.Create(d.logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()

	// FLYD_HOME is the test's directory: the daemon reads no config of the
	// host's (its default is FLYD_HOME/flyd.yaml, absent unless a test
	// writes one). The embedded registry gets a port of its own: tests run
	// side by side.
	args := append([]string{"daemon", "--socket", d.socket, "--state-dir", d.stateDir, "--run-dir", d.runDir,
		"--registry-listen", "127.0.0.1:0", "--cgroup-parent", cgroupParent(o.dir),
		"--workloads-dir", filepath.Join(o.dir, "workloads.d")}, o.args...)
	d.cmd = exec.Command(flydBin, args...)
	d.cmd.Dir = d.dir
	d.cmd.Env = append(append(cleanEnv(), "FLYD_HOME="+o.dir), o.env...)
	d.cmd.Stdout, d.cmd.Stderr = logFile, logFile
	d.cmd.ExtraFiles = o.files
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = d.cmd.Wait(); close(d.done) }()
	d.client = api.NewClient(d.socket)
	t.Cleanup(d.cleanup)

	deadline := time.Now().Add(waitFor)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		st, err := d.client.Status(ctx)
		cancel()
		if err == nil && st.PID == d.cmd.Process.Pid {
			return d
		}
		select {
		case <-d.done:
			t.Fatalf("flyd daemon exited before it answered (%v):\n%s", d.cmd.ProcessState, d.log())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("flyd daemon did not answer on %s within %s: %v\n%s", d.socket, waitFor, err, d.log())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// cleanEnv is the test's environment without what would point the daemon
// or the CLI somewhere else.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "NOTIFY_SOCKET=") && !strings.HasPrefix(kv, "FLYD_SOCKET=") && !strings.HasPrefix(kv, "FLYD_HOME=") &&
			!strings.HasPrefix(kv, "FLYD_PROJECT=") && !strings.HasPrefix(kv, "FLYD_PROFILES=") {
			env = append(env, kv)
		}
	}
	return env
}
