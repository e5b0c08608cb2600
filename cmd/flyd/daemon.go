package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"

	"github.com/flyd-dev/flyd/cmd/internal/cli"
	"github.com/flyd-dev/flyd/internal/trust"
)

// daemonProgram is the program that runs the daemon, the registry's server
// and client, and flyd top (cmd/flyd-daemon): what links the runtimes'
// clients, etcd's, the registry's (TLS) and a terminal UI's libraries,
// whose start-up the other commands do not pay. It is looked for beside this executable (a build's bin/) and
// then in ../libexec/flyd/ (what scripts/install lays out).
const daemonProgram = "flyd-daemon"

// composeProgram reads compose files (cmd/flyd-compose): compose's loader
// is linked there alone. It is looked for where daemonProgram is.
const composeProgram = "flyd-compose"

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
	return fmt.Errorf("exec %s: %w", path, syscall.Exec(path, argv, termHidden(os.Environ())))
}

// callersTerm is where the daemon program finds the TERM of its caller,
// which it puts back as TERM first thing (cmd/flyd-daemon's main).
const callersTerm = "FLYD_TERM"

// termHidden is env with TERM=dumb and the caller's TERM in callersTerm.
// The terminal UI's library (bubbletea v1), when it is initialised and
// so before the program's main, asks a terminal on stdout its background
// colour, and waits 5 s for an answer that a plain pty, many a CI's
// terminal and some tmux setups never give; it asks no terminal whose
// TERM is dumb. flyd top draws no colour that depends on the background.
func termHidden(env []string) []string {
	out := make([]string, 0, len(env)+2)
	term := ""
	for _, kv := range env {
		switch {
		case strings.HasPrefix(kv, "TERM="):
			term = kv[len("TERM="):]
		case strings.HasPrefix(kv, callersTerm+"="):
		default:
			out = append(out, kv)
		}
	}
	return append(out, "TERM=dumb", callersTerm+"="+term)
}

func findDaemon() (string, error) { return findProgram(daemonProgram, "daemon") }

// findProgram is the program name (what: what it is, for messages) beside
// this executable, or in ../libexec/flyd/, refused when someone who could
// not change this executable could change it (trust.Program).
func findProgram(name, what string) (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	if self, err = filepath.EvalSymlinks(self); err != nil {
		return "", err
	}
	dir := filepath.Dir(self)
	tried := []string{filepath.Join(dir, name), filepath.Join(dir, "..", "libexec", "flyd", name)}
	for _, p := range tried {
		if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err := trust.Program(p, self); err != nil {
			return "", fmt.Errorf("refusing the %s program: %w", what, err)
		}
		return p, nil
	}
	return "", fmt.Errorf("the %s program %s is in neither %s nor %s (scripts/install puts it in the second; a build puts flyd's programs in one dir: go build -o bin/ ./cmd/...)",
		what, name, dir, filepath.Dir(tried[1]))
}
