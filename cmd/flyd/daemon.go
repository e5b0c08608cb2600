package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"syscall"

	"github.com/flyd-dev/flyd/internal/cli"
	"github.com/flyd-dev/flyd/internal/trust"
)

// daemonProgram is the program that runs the daemon, the registry's server
// and client, and flyd top (cmd/flyd-daemon): what links the runtimes'
// clients, etcd's, the registry's (TLS) and a terminal UI's libraries,
// whose start-up the other commands do not pay. It is looked for beside this executable (a build's bin/) and
// then in ../libexec/flyd/ (what scripts/install lays out).
const daemonProgram = "flyd-daemon"

func init() {
	// The main goroutine stays on the process's first thread, so that
	// execDaemon execs from it: what the kernel keeps per thread and a
	// thread born later lacks (a parent-death signal set for the process
	// that runs `flyd daemon`) goes on to the daemon. Only a command that
	// may exec is held there: a locked main goroutine that waits has its
	// thread handed off and another started, which a short call pays for.
	if mayExecDaemon(os.Args[1:]) {
		runtime.LockOSThread()
	}
	for _, c := range []struct{ name, summary, usage string }{
		{"daemon", "run the daemon in the foreground", "[flags] (flyd daemon -h lists them)"},
		{"top", "a live view of the workloads, their logs and events, with keys to act on them", ""},
	} {
		cli.Register(c.name, c.summary, c.usage,
			func(_ context.Context, _ *cli.Env, args []string) error { return execDaemon(c.name, args...) })
	}
}

// mayExecDaemon says whether args may name a command that execs the
// daemon program: any of them, wherever the shared flags put the name.
func mayExecDaemon(args []string) bool {
	for _, a := range args {
		switch a {
		case "daemon", "top", "registry":
			return true
		}
	}
	return false
}

// execDaemon replaces this process with the daemon program, running its
// command name with args: the pid, the environment and the descriptors
// stay, so to systemd (Type=notify, MAINPID) and to whoever signals it the
// daemon is the process that ran `flyd daemon`.
func execDaemon(name string, args ...string) error {
	path, err := findDaemon()
	if err != nil {
		return err
	}
	argv := append([]string{os.Args[0], name}, args...)
	return fmt.Errorf("exec %s: %w", path, syscall.Exec(path, argv, os.Environ()))
}

func findDaemon() (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	if self, err = filepath.EvalSymlinks(self); err != nil {
		return "", err
	}
	dir := filepath.Dir(self)
	tried := []string{filepath.Join(dir, daemonProgram), filepath.Join(dir, "..", "libexec", "flyd", daemonProgram)}
	for _, p := range tried {
		if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err := trust.Program(p, self); err != nil {
			return "", fmt.Errorf("refusing the daemon program: %w", err)
		}
		return p, nil
	}
	return "", fmt.Errorf("the daemon program %s is in neither %s nor %s (scripts/install puts it in the second; a build puts both programs in one dir: go build -o bin/ ./cmd/flyd ./cmd/flyd-daemon)",
		daemonProgram, dir, filepath.Dir(tried[1]))
}
