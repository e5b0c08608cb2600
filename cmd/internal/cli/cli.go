// Package cli is what flyd's two programs share: the command table, the
// flag rules, the exit codes, the version, the user's paths (Home) and the
// one notation of a workload's ports (Ports, for `flyd ps` and `flyd
// top`). cmd/flyd is the client every user runs;
// cmd/flyd-daemon is the daemon, the registry's server and client and flyd
// top, which `flyd daemon`, `flyd registry` and `flyd top` exec. They are
// two programs so that a client call does not pay the others' start-up
// (the containerd client's, etcd's, TLS's, the metrics' and a terminal
// UI's package initialisation: 12.7 ms for `flyd version` in one program,
// ~3.5 ms in two); to a user they are one command.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/flyd-dev/flyd/api"
	"github.com/flyd-dev/flyd/spec"
)

// Version is set at build time with
// -ldflags "-X github.com/flyd-dev/flyd/internal/cli.Version=...".
var Version = "dev"

// Command is one subcommand.
type Command struct {
	Summary string
	Usage   string
	Run     func(ctx context.Context, env *Env, args []string) error
	// Query is a command that asks and changes nothing, and answers at
	// once: an interrupt ends it where it stands (the signal's default),
	// so it does without the signal handling that cancels the others'
	// context, which starts two threads in every call.
	Query bool
	// Hidden leaves the command out of the usage and of Commands: one
	// that programs call (flyd __complete), not people.
	Hidden bool
}

var commands = map[string]Command{}

// Register adds a subcommand to this program's table.
func Register(name, summary, usage string, run func(ctx context.Context, env *Env, args []string) error) {
	commands[name] = Command{Summary: summary, Usage: usage, Run: run}
}

// RegisterQuery adds a subcommand that is a Query.
func RegisterQuery(name, summary, usage string, run func(ctx context.Context, env *Env, args []string) error) {
	commands[name] = Command{Summary: summary, Usage: usage, Run: run, Query: true}
}

// RegisterHidden adds a subcommand that is Hidden.
func RegisterHidden(name string, run func(ctx context.Context, env *Env, args []string) error) {
	commands[name] = Command{Run: run, Hidden: true}
}

// Commands are the names of the commands that are not Hidden, with their
// usage lines.
func Commands() map[string]string {
	out := map[string]string{}
	for n, c := range commands {
		if !c.Hidden {
			out[n] = c.Usage
		}
	}
	return out
}

// errListed ends a command's Run where it parses its flags, in
// CommandFlags.
var errListed = errors.New("flags listed")

// CommandFlags is the flag set the command name parses, or nil if it
// parses none through Env, and whether its flags end at its first
// positional argument, which begins a program's command line
// (ParseCommand). It runs the command up to its flag parsing
// (Env.Parse, ParseCommand or ParseFlags), where it stops without parsing;
// so it is for a command that does nothing before it parses its flags,
// which every client command does. A command that execs another program
// first must not be asked.
func CommandFlags(name string) (fs *flag.FlagSet, runsCommand bool) {
	c, ok := commands[name]
	if !ok {
		return nil, false
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // nothing a command would start is wanted
	env := &Env{Stdout: io.Discard, Stderr: io.Discard, Name: name, Usage: c.Usage,
		listFlags: func(f *flag.FlagSet, command bool) { fs, runsCommand = f, command }}
	if err := c.Run(ctx, env, nil); !errors.Is(err, errListed) {
		return nil, false
	}
	return fs, runsCommand
}

// ExitError makes the process exit with Code, saying nothing more: the
// status of a command flyd ran (flyd run), already reported.
type ExitError struct{ Code int }

func (e ExitError) Error() string { return fmt.Sprintf("exit status %d", e.Code) }

// UsageError makes the process exit 2 with the command's usage.
type UsageError struct{ msg string }

func (e UsageError) Error() string { return e.msg }

// Usagef is a UsageError.
func Usagef(format string, args ...any) error { return UsageError{fmt.Sprintf(format, args...)} }

// Usage makes err a UsageError.
func Usage(err error) error { return UsageError{err.Error()} }

// Main runs the subcommand args name and returns the exit status: 0, 1 for
// a failure, 2 for a usage error.
func Main(args []string, stdout, stderr io.Writer) int {
	shared, args, err := leadingFlags(args)
	if err != nil {
		fmt.Fprintf(stderr, "flyd: %s\n", err)
		printUsage(stderr)
		return 2
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		printUsage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	name := args[0]
	c, ok := commands[name]
	if !ok {
		fmt.Fprintf(stderr, "flyd: unknown command %q\n", name)
		printUsage(stderr)
		return 2
	}
	ctx, stop := context.Background(), func() {}
	if !c.Query {
		ctx, stop = signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	}
	defer stop()
	env := &Env{Stdout: stdout, Stderr: stderr, Name: name, Usage: c.Usage}
	// The shared flags go first, so that the command's own copy of them
	// still wins: `flyd --json ps --json=false` prints a table.
	err = c.Run(ctx, env, append(shared, args[1:]...))
	if env.Client != nil {
		env.Client.Close()
	}
	var ue UsageError
	var ee ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.Code
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "flyd %s: %s\nusage: flyd %s %s\n", name, ue.msg, name, env.Usage)
		return 2
	default:
		fmt.Fprintf(stderr, "flyd %s: %s\n", name, err)
		return 1
	}
}

// leadingFlags takes the flags every client command shares (--socket,
// --json, -p) from before the command's name, as `flyd --socket S ps` writes
// them, and returns them apart from the rest.
func leadingFlags(args []string) (shared, rest []string, err error) {
	for len(args) > 0 && strings.HasPrefix(args[0], "-") && args[0] != "-" {
		name, value, hasValue := strings.Cut(strings.TrimLeft(args[0], "-"), "=")
		switch {
		case name == "h" || name == "help":
			return shared, args, nil
		case name == "json":
			shared, args = append(shared, args[0]), args[1:]
		case (name == "p" || name == "project") && hasValue:
			shared, args = append(shared, args[0]), args[1:]
		case name == "p" || name == "project":
			if len(args) < 2 {
				return nil, nil, fmt.Errorf("%s needs a project's name", args[0])
			}
			shared, args = append(shared, args[0], args[1]), args[2:]
		case name == "socket" && hasValue:
			if value == "" {
				return nil, nil, errors.New("--socket needs a path")
			}
			shared, args = append(shared, args[0]), args[1:]
		case name == "socket":
			if len(args) < 2 {
				return nil, nil, errors.New("--socket needs a path")
			}
			shared, args = append(shared, args[0], args[1]), args[2:]
		default:
			return nil, nil, fmt.Errorf("%s is not a flag of every command: put it after the command's name", args[0])
		}
	}
	return shared, args, nil
}

func printUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: flyd COMMAND [flags] [args]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for n, c := range commands {
		if !c.Hidden {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].Summary)
	}
	fmt.Fprintln(w, "\nThe client commands take --socket (or FLYD_SOCKET), -p PROJECT (or FLYD_PROJECT) and --json, before the command's name or after it.")
}

// Env is what a command gets: its output streams and, once a client
// command's flags are parsed, a client for the daemon.
type Env struct {
	Stdout, Stderr io.Writer
	Name, Usage    string
	Socket         string
	JSON           bool
	// Project is -p's (or FLYD_PROJECT's): the project whose names the
	// command's names are; empty for the default project.
	Project string
	Client  *api.Client
	// listFlags, in CommandFlags, is given the command's flag set in
	// place of its parsing.
	listFlags func(fs *flag.FlagSet, command bool)
}

// Flags returns a flag set with the flags every client command shares.
func (c *Env) Flags() *flag.FlagSet {
	fs := flag.NewFlagSet(c.Name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	def := os.Getenv("FLYD_SOCKET")
	if def == "" {
		def = Home().Socket
	}
	fs.StringVar(&c.Socket, "socket", def, "daemon socket (env FLYD_SOCKET, or FLYD_HOME's)")
	fs.BoolVar(&c.JSON, "json", false, "print JSON")
	fs.StringVar(&c.Project, "p", os.Getenv("FLYD_PROJECT"), "the project (env FLYD_PROJECT); names are its own")
	fs.StringVar(&c.Project, "project", os.Getenv("FLYD_PROJECT"), "same as -p")
	return fs
}

// FullName is a name given on the command line as the daemon knows it:
// in -p's project, unless it names its project itself (PROJECT.NAME).
func (c *Env) FullName(name string) string {
	if c.Project == "" || strings.Contains(name, spec.ProjectSep) {
		return name
	}
	return spec.FullName(c.Project, name)
}

// InProject says whether a full name is of -p's project (the default
// project without -p).
func (c *Env) InProject(full string) bool { return spec.ProjectOf(full) == c.Project }

// Parse parses flags wherever they stand among the arguments, up to the
// first "--", and returns the positional ones. Everything after "--" is
// positional as written: nothing there is ever read as a flag.
func (c *Env) Parse(fs *flag.FlagSet, args []string) ([]string, error) {
	head, tail := args, []string(nil)
	if i := slices.Index(args, "--"); i >= 0 {
		head, tail = args[:i], args[i+1:]
	}
	var pos []string
	for {
		if err := c.ParseFlags(fs, head); err != nil {
			return nil, err
		}
		head = fs.Args()
		if len(head) == 0 {
			break
		}
		pos = append(pos, head[0])
		head = head[1:]
	}
	c.Client = api.NewClient(c.Socket)
	return append(pos, tail...), nil
}

// ParseCommand parses flags up to the first "--" or the first positional
// argument, whichever comes first, and returns the rest untouched: the
// command line of a program to run, whose flags are its own.
func (c *Env) ParseCommand(fs *flag.FlagSet, args []string) ([]string, error) {
	if c.listFlags != nil {
		c.listFlags(fs, true)
		return nil, errListed
	}
	if err := c.ParseFlags(fs, args); err != nil {
		return nil, err
	}
	c.Client = api.NewClient(c.Socket)
	return fs.Args(), nil
}

// ParseFlags parses args with fs; -h prints the usage and the flags.
func (c *Env) ParseFlags(fs *flag.FlagSet, args []string) error {
	if c.listFlags != nil {
		c.listFlags(fs, false)
		return errListed
	}
	err := fs.Parse(args)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, flag.ErrHelp):
		c.PrintFlags(fs)
		return err
	default:
		return UsageError{err.Error()}
	}
}

// PrintFlags prints the command's usage and its flags' defaults.
func (c *Env) PrintFlags(fs *flag.FlagSet) {
	fmt.Fprintf(c.Stderr, "usage: flyd %s %s\n", c.Name, c.Usage)
	fs.SetOutput(c.Stderr)
	fs.PrintDefaults()
}

// IsTerminal says whether f is a terminal.
func IsTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// Paths are where a daemon keeps what it uses, by default: the system's,
// or all under one folder when FLYD_HOME names it.
type Paths struct {
	Config, Socket, StateDir, RunDir, WorkloadsDir string
}

// Home is the default paths: under $FLYD_HOME when it is set (a daemon
// beside the installed one, which reads none of the installed one's
// files), the system's otherwise.
func Home() Paths {
	home := os.Getenv("FLYD_HOME")
	if home == "" {
		return Paths{Config: "/etc/flyd/flyd.yaml", Socket: api.HomeSocket(), StateDir: "/var/lib/flyd",
			RunDir: "/run/flyd", WorkloadsDir: "/etc/flyd/workloads.d"}
	}
	return Paths{Config: filepath.Join(home, "flyd.yaml"), Socket: api.HomeSocket(),
		StateDir: filepath.Join(home, "state"), RunDir: filepath.Join(home, "run"), WorkloadsDir: filepath.Join(home, "workloads.d")}
}
