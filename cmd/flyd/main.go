// Command flyd is both the daemon and its command-line client. The client
// is a thin layer over package api; the daemon wires the packages together.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"sort"
	"syscall"

	"github.com/flyd-dev/flyd/api"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// command is one subcommand of the CLI.
type command struct {
	summary string
	usage   string
	run     func(ctx context.Context, env *cli, args []string) error
}

var commands = map[string]command{}

func register(name string, c command) { commands[name] = c }

// usageError makes the process exit 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
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
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	env := &cli{stdout: stdout, stderr: stderr, name: name, usage: c.usage}
	err := c.run(ctx, env, args[1:])
	if env.client != nil {
		env.client.Close()
	}
	var ue usageError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "flyd %s: %s\nusage: flyd %s %s\n", name, ue.msg, name, c.usage)
		return 2
	default:
		fmt.Fprintf(stderr, "flyd %s: %s\n", name, err)
		return 1
	}
}

func printUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: flyd COMMAND [flags] [args]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nThe client commands take --socket (or FLYD_SOCKET) and --json.")
}

// cli is what a client command gets: its output streams and, once its
// flags are parsed, a client for the daemon.
type cli struct {
	stdout, stderr io.Writer
	name, usage    string
	socket         string
	json           bool
	client         *api.Client
}

// flags returns a flag set with the flags every client command shares.
func (c *cli) flags() *flag.FlagSet {
	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	def := os.Getenv("FLYD_SOCKET")
	if def == "" {
		def = api.DefaultSocket
	}
	fs.StringVar(&c.socket, "socket", def, "daemon socket (env FLYD_SOCKET)")
	fs.BoolVar(&c.json, "json", false, "print JSON")
	return fs
}

// parse parses flags wherever they stand among the arguments, up to the
// first "--", and returns the positional ones. Everything after "--" is
// positional as written: nothing there is ever read as a flag.
func (c *cli) parse(fs *flag.FlagSet, args []string) ([]string, error) {
	head, tail := args, []string(nil)
	if i := slices.Index(args, "--"); i >= 0 {
		head, tail = args[:i], args[i+1:]
	}
	var pos []string
	for {
		if err := c.parseFlags(fs, head); err != nil {
			return nil, err
		}
		head = fs.Args()
		if len(head) == 0 {
			break
		}
		pos = append(pos, head[0])
		head = head[1:]
	}
	c.client = api.NewClient(c.socket)
	return append(pos, tail...), nil
}

// parseCommand parses flags up to the first "--" or the first positional
// argument, whichever comes first, and returns the rest untouched: the
// command line of a program to run, whose flags are its own.
func (c *cli) parseCommand(fs *flag.FlagSet, args []string) ([]string, error) {
	if err := c.parseFlags(fs, args); err != nil {
		return nil, err
	}
	c.client = api.NewClient(c.socket)
	return fs.Args(), nil
}

func (c *cli) parseFlags(fs *flag.FlagSet, args []string) error {
	err := fs.Parse(args)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, flag.ErrHelp):
		c.printFlags(fs)
		return err
	default:
		return usageError{err.Error()}
	}
}

func (c *cli) printFlags(fs *flag.FlagSet) {
	fmt.Fprintf(c.stderr, "usage: flyd %s %s\n", c.name, c.usage)
	fs.SetOutput(c.stderr)
	fs.PrintDefaults()
}
