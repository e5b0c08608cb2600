package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/flyd-dev/flyd/api"
	"github.com/flyd-dev/flyd/cmd/internal/cli"
	"github.com/flyd-dev/flyd/spec"
)

func init() {
	cli.Register("apply", "create or replace workloads from spec files", "-f FILE|DIR|- [-f ...] [--env-file FILE ...] [--profile NAME ...] [--start=false] [--force] [--wait [--timeout 1m]]", cmdApply)
	cli.RegisterQuery("ps", "list workloads", "", cmdPs)
	cli.RegisterQuery("inspect", "show a workload as JSON", "NAME", cmdInspect)
	cli.Register("start", "start workloads", "NAME...|--all", lifecycleCmd(api.ActionStart))
	cli.Register("stop", "stop workloads", "NAME...|--all [--force]", lifecycleCmd(api.ActionStop))
	cli.Register("restart", "restart workloads", "NAME...|--all", lifecycleCmd(api.ActionRestart))
	cli.Register("rm", "stop and remove workloads", "NAME...|--all [--force]", cmdRm)
	cli.Register("reload", "have workloads take their configuration again, as their spec's reload says", "NAME...|--all", lifecycleCmd(api.ActionReload))
	cli.Register("signal", "send a signal to workloads", "NAME...|--all SIGNAL", cmdSignal)
	cli.Register("scale", "run a workload as N replicas, NAME-1…NAME-N, replacing those that ran one at a time", "NAME N [--force] [--wait [--timeout 1m]]", cmdScale)
	cli.RegisterQuery("status", "show the daemon's status", "", cmdStatus)
}

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

func cmdApply(ctx context.Context, c *cli.Env, args []string) error {
	fs := c.Flags()
	var files stringList
	fs.Var(&files, "f", "spec file, directory of spec files, or - for stdin (repeatable)")
	var envFiles, profiles stringList
	fs.Var(&envFiles, "env-file", "variables for the files' ${VAR}s, in place of the .env beside them (repeatable, a later file over an earlier)")
	fs.Var(&profiles, "profile", "apply the workloads of this profile too (repeatable; env FLYD_PROFILES, comma-separated)")
	start := fs.Bool("start", true, "start the workloads")
	force := fs.Bool("force", false, "change workloads that belong to a file of the workloads directory")
	wait, timeout := waitFlags(fs)
	pos, err := c.Parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return cli.Usagef("unexpected argument %q", pos[0])
	}
	if len(files) == 0 {
		return cli.Usagef("-f is required")
	}
	d, err := loadSpecs(c, files, envFiles, profiles)
	if err != nil {
		return err
	}
	if err := putDocuments(ctx, c, d.Docs); err != nil {
		return err
	}
	specs := d.Workloads
	if len(specs) == 0 {
		return nil
	}
	names := make([]string, len(specs))
	for i, w := range specs {
		names[i] = fullName(w.Project, w.Name)
	}
	// One batch: the daemon applies in `after` order, in parallel.
	stop := showProgress(c, ctx, names)
	rs, err := c.Client.ApplyBatch(ctx, specs, api.ApplyOptions{Start: *start, Force: *force})
	stop()
	if err := report(c, "apply", rs, err); err != nil || !*wait {
		return err
	}
	return waitUp(c, ctx, names, *timeout)
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func cmdPs(ctx context.Context, c *cli.Env, args []string) error {
	fs := c.Flags()
	// ps lists every project's without -p; --all-projects says so, as
	// the other commands take it.
	allProjects := fs.Bool("all-projects", false, "every project's workloads (the default without -p)")
	pos, err := c.Parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return cli.Usagef("unexpected argument %q", pos[0])
	}
	if *allProjects && c.Project != "" {
		return cli.Usagef("-p or --all-projects, not both")
	}
	ws, err := c.Client.List(ctx)
	if err != nil {
		return err
	}
	if c.Project != "" {
		ws = slices.DeleteFunc(ws, func(w api.Workload) bool { return !c.InProject(w.Name) })
	}
	return output(c, ws, func(w io.Writer) { printWorkloads(w, ws) })
}

func cmdInspect(ctx context.Context, c *cli.Env, args []string) error {
	pos, err := c.Parse(c.Flags(), args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return cli.Usagef("one workload name is needed")
	}
	w, err := c.Client.Get(ctx, c.FullName(pos[0]))
	if err != nil {
		return err
	}
	return printJSON(c.Stdout, w)
}

func cmdScale(ctx context.Context, c *cli.Env, args []string) error {
	fs := c.Flags()
	force := fs.Bool("force", false, "scale a group that belongs to a file of the workloads directory")
	wait, timeout := waitFlags(fs)
	pos, err := c.Parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return cli.Usagef("a workload's name and a number of replicas are needed")
	}
	n, err := strconv.Atoi(pos[1])
	if err != nil {
		return cli.Usagef("%q is not a number of replicas", pos[1])
	}
	name := c.FullName(pos[0])
	w, err := c.Client.Scale(ctx, name, n, api.ApplyOptions{Start: true, Force: *force})
	if err != nil {
		return err
	}
	if !c.JSON && !*wait {
		fmt.Fprintf(c.Stdout, "%s: %d replicas, %s-1 to %s-%d\n", name, n, name, name, n)
	}
	if *wait {
		return waitUp(c, ctx, []string{name}, *timeout)
	}
	if c.JSON {
		return printJSON(c.Stdout, w)
	}
	return nil
}

func cmdStatus(ctx context.Context, c *cli.Env, args []string) error {
	if _, err := c.Parse(c.Flags(), args); err != nil {
		return err
	}
	st, err := c.Client.Status(ctx)
	if err != nil {
		return err
	}
	return output(c, st, func(w io.Writer) { printStatus(w, st) })
}

// output prints v as JSON with --json, else as human prints it.
func output(c *cli.Env, v any, human func(io.Writer)) error {
	if c.JSON {
		return printJSON(c.Stdout, v)
	}
	// Buffered: a table is written a cell at a time, and unbuffered that
	// was a write(2) per cell, half of `flyd ps` with 3,000 workloads.
	b := bufio.NewWriterSize(c.Stdout, 64<<10)
	human(b)
	return b.Flush()
}

// scopeFlags adds --all and --all-projects to a command that acts on
// workloads by name.
func scopeFlags(fs *flag.FlagSet) (all, allProjects *bool) {
	return fs.Bool("all", false, "every workload of the project (-p; the default project without it)"),
		fs.Bool("all-projects", false, "every workload of every project")
}

// selection resolves NAME... (in -p's project), --all (every workload of
// -p's project, the default project's without -p) or --all-projects
// (every workload of the host) into a batch.
func selection(ctx context.Context, c *cli.Env, pos []string, all, allProjects bool) (api.Batch, error) {
	switch {
	case (all || allProjects) && len(pos) > 0:
		return api.Batch{}, cli.Usagef("names and --all cannot be used together")
	case all && allProjects:
		return api.Batch{}, cli.Usagef("--all or --all-projects, not both")
	case allProjects:
		return api.Batch{All: true}, nil
	case all:
		return api.Batch{All: true, InProject: true, Project: c.Project}, nil
	case len(pos) == 0:
		return api.Batch{}, cli.Usagef("name a workload, or use --all")
	}
	names := make([]string, len(pos))
	for i, n := range pos {
		names[i] = c.FullName(n)
	}
	return api.Batch{Names: names}, nil
}

// projectNames names every workload of -p's project.
func projectNames(ctx context.Context, c *cli.Env) ([]string, error) {
	ws, err := c.Client.List(ctx)
	if err != nil {
		return nil, err
	}
	names := []string{}
	for _, w := range ws {
		if c.InProject(w.Name) {
			names = append(names, w.Name)
		}
	}
	return names, nil
}

// runBatch runs action on the batch, and reports it.
func runBatch(ctx context.Context, c *cli.Env, action api.Action, verb string, bt api.Batch) ([]api.Result, error) {
	rs, err := c.Client.Batch(ctx, action, bt)
	return rs, report(c, verb, rs, err)
}

// report prints a batch's results, each failure on stderr; the command
// fails if the batch or any operation in it did.
func report(c *cli.Env, verb string, rs []api.Result, err error) error {
	if err != nil {
		return err
	}
	var failed []string
	for _, r := range rs {
		switch {
		case r.Error != nil:
			fmt.Fprintf(c.Stderr, "%s: %s\n", r.Name, r.Error)
		case r.State == api.StateFailed:
			// Done, but it cannot run: the user must hear why.
			fmt.Fprintf(c.Stderr, "%s: failed: %s\n", r.Name, r.LastError)
		default:
			continue
		}
		failed = append(failed, r.Name)
	}
	if c.JSON {
		if err := printJSON(c.Stdout, rs); err != nil {
			return err
		}
	} else {
		for _, r := range rs {
			switch {
			case r.Error != nil, r.State == api.StateFailed:
			case r.State != "":
				fmt.Fprintf(c.Stdout, "%s %s\n", r.Name, r.State)
			case verb == "signal":
				fmt.Fprintf(c.Stdout, "%s signalled\n", r.Name)
			case verb == "reload":
				fmt.Fprintf(c.Stdout, "%s reloaded\n", r.Name)
			default:
				fmt.Fprintf(c.Stdout, "%s %sd\n", r.Name, verb)
			}
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("could not %s %s", verb, strings.Join(failed, ", "))
	}
	return nil
}

func lifecycleCmd(action api.Action) func(context.Context, *cli.Env, []string) error {
	return func(ctx context.Context, c *cli.Env, args []string) error {
		fs := c.Flags()
		all, allProjects := scopeFlags(fs)
		force, wait, timeout, par := new(bool), new(bool), new(time.Duration), new(bool)
		switch action {
		case api.ActionStop:
			force = fs.Bool("force", false, "kill at once, without the grace period, overtaking a stop in progress")
			par = fs.Bool("parallel", false, "stop all at once; without it, dependents stop before what they depend on")
		case api.ActionStart, api.ActionRestart:
			wait, timeout = waitFlags(fs)
		}
		pos, err := c.Parse(fs, args)
		if err != nil {
			return err
		}
		bt, err := selection(ctx, c, pos, *all, *allProjects)
		if err != nil {
			return err
		}
		bt.Force, bt.Parallel = *force, *par
		rs, err := runBatch(ctx, c, action, string(action), bt)
		if err != nil || !*wait {
			return err
		}
		names := make([]string, len(rs))
		for i, r := range rs {
			names[i] = r.Name
		}
		return waitUp(c, ctx, names, *timeout)
	}
}

func cmdRm(ctx context.Context, c *cli.Env, args []string) error {
	fs := c.Flags()
	all, allProjects := scopeFlags(fs)
	force := fs.Bool("force", false, "remove workloads that belong to a file of the workloads directory")
	par := fs.Bool("parallel", false, "remove all at once; without it, dependents go before what they depend on")
	pos, err := c.Parse(fs, args)
	if err != nil {
		return err
	}
	bt, err := selection(ctx, c, pos, *all, *allProjects)
	if err != nil {
		return err
	}
	bt.Force, bt.Parallel = *force, *par
	_, err = runBatch(ctx, c, api.ActionRemove, "remove", bt)
	return err
}

// cmdSignal sends a signal to every process of each workload named, as the
// stop signal goes: nginx's reload is `flyd signal web HUP`.
func cmdSignal(ctx context.Context, c *cli.Env, args []string) error {
	fs := c.Flags()
	all, allProjects := scopeFlags(fs)
	pos, err := c.Parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return cli.Usagef("a signal is needed, after the names")
	}
	sig := pos[len(pos)-1]
	if _, err := spec.ParseSignal(sig); err != nil {
		return cli.Usagef("%v (the signal comes last: flyd signal NAME... SIGNAL)", err)
	}
	bt, err := selection(ctx, c, pos[:len(pos)-1], *all, *allProjects)
	if err != nil {
		return err
	}
	bt.Signal = sig
	_, err = runBatch(ctx, c, api.ActionSignal, "signal", bt)
	return err
}
