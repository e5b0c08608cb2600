package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/flyd-dev/flyd/api"
	"github.com/flyd-dev/flyd/cmd/internal/cli"
	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/spec"
)

func init() {
	cli.Register("up", "make a project what its files say: apply them, remove what they no longer hold",
		"[-p PROJECT] -f FILE|DIR [-f ...] [--profile P] [--env-file F] [--wait [--timeout 1m]] [--watch] [--attach | --lease D] [--start=false]", cmdUp)
	cli.Register("down", "remove everything of a project: workloads, networks, policies (and named volumes with --volumes)", "[-p PROJECT | -f DIR] [--volumes] | --stale", cmdDown)
	cli.Register("run", "bring a project up, run a command in it, and take it down",
		"[-p PROJECT] -f FILE|DIR [-f ...] [--keep] [--volumes] [--network NET] [--timeout 1m] [--exit-on-failure=false] [--grace 10s] [--] CMD [ARGS...]", cmdRun)
}

// projectFlags are the flags up and run share: the files, as apply reads
// them, and how long the project may take to come up.
type projectFlags struct {
	files, envFiles, profiles stringList
	start, force              *bool
	timeout                   *time.Duration
	// watch turns on the workloads' watch entries (up --watch).
	watch bool
}

func addProjectFlags(fs *flag.FlagSet) *projectFlags {
	pf := &projectFlags{}
	fs.Var(&pf.files, "f", "spec file or directory of spec files (repeatable); the first one's directory names the project without -p")
	fs.Var(&pf.envFiles, "env-file", "variables for the files' ${VAR}s, in place of the .env beside them (repeatable)")
	fs.Var(&pf.profiles, "profile", "apply the workloads of this profile too (repeatable; env FLYD_PROFILES)")
	pf.start = fs.Bool("start", true, "start the workloads")
	pf.force = fs.Bool("force", false, "change workloads that belong to a file of the workloads directory")
	pf.timeout = fs.Duration("timeout", time.Minute, "how long the project may take to come up")
	return pf
}

// projectName is -p's project, or FLYD_PROJECT's, or the compose
// project's name when the first file is compose's, or else the name of
// the directory of the first file, made a DNS label, as compose names a
// project after its directory.
func projectName(c *cli.Env, files []string) (string, error) {
	name := c.Project
	if name == "" {
		// A file compose refuses is named later, as it is read with
		// --env-file; meanwhile the directory names the project.
		if n, ok, err := composeProject(files); ok && err == nil {
			name = n
		}
	}
	if name == "" && len(files) > 0 && files[0] != "-" {
		dir, err := filepath.Abs(files[0])
		if err != nil {
			return "", err
		}
		if fi, err := os.Stat(dir); err == nil && !fi.IsDir() {
			dir = filepath.Dir(dir)
		}
		name = labelOf(filepath.Base(dir))
	}
	switch {
	case name == "":
		return "", cli.Usagef("name the project: -p NAME (or FLYD_PROJECT, or -f a directory)")
	case !spec.ValidProject(name):
		return "", cli.Usagef("project %q: a project's name must be a DNS label (lower-case letters, digits and '-')", name)
	}
	c.Project = name
	return name, nil
}

// labelOf makes a directory's name a DNS label: lower case, every other
// character a '-', at most 63 long, without '-' at either end.
func labelOf(s string) string {
	b := []byte(strings.ToLower(s))
	for i, ch := range b {
		if (ch < 'a' || ch > 'z') && (ch < '0' || ch > '9') {
			b[i] = '-'
		}
	}
	return strings.Trim(string(b[:min(len(b), 63)]), "-")
}

// up makes the project what its files say and reports what changed; with
// wait it returns once every workload is up, or says which is not.
func up(ctx context.Context, c *cli.Env, project string, pf *projectFlags, wait bool) ([]string, error) {
	d, leftOut, err := loadSelected(c, pf.files, pf.envFiles, pf.profiles)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(d.Workloads))
	watching := false
	for i, w := range d.Workloads {
		names[i] = fullName(w.Project, w.Name)
		if pf.watch && len(w.Watch) > 0 {
			w.Watching, watching = true, true
		}
	}
	if pf.watch && !watching {
		fmt.Fprintln(c.Stderr, "warning: --watch: no workload of the project has a watch entry")
	}
	stop := showProgress(c, ctx, names)
	ch, err := c.Client.Up(ctx, project, api.Documents{Workloads: d.Workloads, Docs: d.Docs, Keep: leftOut},
		api.ApplyOptions{Start: *pf.start, Force: *pf.force})
	stop()
	if err != nil {
		return nil, err
	}
	if err := reportChange(c, ch); err != nil {
		return names, err
	}
	if !wait || !*pf.start {
		return names, nil
	}
	return names, waitUp(c, ctx, names, *pf.timeout)
}

// reportChange prints what an up or a down did, each failure on stderr.
func reportChange(c *cli.Env, ch *api.ProjectChange) error {
	if c.JSON {
		if err := printJSON(c.Stdout, ch); err != nil {
			return err
		}
	}
	// In the order it went: workloads applied, then removed, then the
	// documents and volumes they held.
	var errs []error
	if err := report(c, "apply", ch.Applied, nil); err != nil {
		errs = append(errs, err)
	}
	if err := report(c, "remove", ch.Removed, nil); err != nil {
		errs = append(errs, err)
	}
	if !c.JSON {
		kinds := spec.DocKinds()
		slices.Reverse(kinds) // as they went
		for _, k := range kinds {
			for _, n := range ch.Docs[k.Name] {
				fmt.Fprintf(c.Stdout, "%s %s removed\n", k.Name, n)
			}
		}
		for _, v := range ch.Volumes {
			fmt.Fprintf(c.Stdout, "volume %s removed\n", v)
		}
	}
	if err := ch.Err(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func cmdUp(ctx context.Context, c *cli.Env, args []string) error {
	fs := c.Flags()
	pf := addProjectFlags(fs)
	wait := fs.Bool("wait", false, "return once every workload is up (running and healthy, or completed), or has failed")
	fs.BoolVar(&pf.watch, "watch", false, "turn on the workloads' watch entries: the daemon restarts, rebuilds or syncs them as their files change, until an up without --watch or a down")
	lease := fs.Duration("lease", 0, "bind the project to a lease: the daemon takes it down this long from now unless an up --lease renews it (0: no lease; an up without it leaves a lease as it is)")
	attach := fs.Bool("attach", false, "stay attached: follow the project's logs, each line behind its workload's name, and on Ctrl-C take the project down")
	pos, err := c.Parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return cli.Usagef("unexpected argument %q", pos[0])
	}
	if len(pf.files) == 0 {
		return cli.Usagef("-f is required")
	}
	project, err := projectName(c, pf.files)
	if err != nil {
		return err
	}
	switch {
	case *attach && *lease > 0:
		return cli.Usagef("--attach or --lease, not both: an attached up holds its project while it runs")
	case *attach:
		return upAttached(ctx, c, project, pf, *wait)
	case *lease > 0:
		if err := c.Client.Lease(ctx, project, api.LeaseOptions{TTL: *lease}); err != nil {
			return err
		}
	}
	_, err = up(ctx, c, project, pf, *wait)
	return err
}

// upAttached is compose's attached up: the project bound to this process
// (as run's is), brought up, its logs followed, each line behind its
// workload's name; SIGINT or SIGTERM takes it down and ends the command,
// 0; a second one exits at once, 128+N, and leaves the project to the
// daemon, which takes it down after its grace.
func upAttached(ctx context.Context, c *cli.Env, project string, pf *projectFlags, wait bool) error {
	ctx, got, stopSignals := interrupts(ctx, c, project)
	defer stopSignals()
	release, err := c.Client.Hold(ctx, project, api.LeaseOptions{})
	if err != nil {
		return err
	}
	defer func() {
		defer release()
		down, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		defer cancel()
		if _, err := c.Client.Down(down, project, api.RemoveOptions{}); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			fmt.Fprintf(c.Stderr, "flyd up: taking project %s down: %v\n", project, err)
		} else {
			fmt.Fprintf(c.Stderr, "flyd up: project %s taken down\n", project)
		}
	}()
	// What up says of its own goes to stderr: stdout is the logs'.
	quiet := *c
	quiet.Stdout = c.Stderr
	names, err := up(ctx, &quiet, project, pf, wait)
	if err == nil {
		var ws []api.Workload
		if ws, err = c.Client.ListProject(ctx, project); err == nil {
			names = groupMembers(ws, names)
			err = printLogs(ctx, c, names, api.LogQuery{Tail: -1, Follow: true}, logOptions{named: true, patience: 30 * time.Second})
		}
	}
	if _, ok := got(); ok {
		return nil // asked to end: the project goes
	}
	return err
}

func cmdDown(ctx context.Context, c *cli.Env, args []string) error {
	fs := c.Flags()
	var files stringList
	fs.Var(&files, "f", "a file or directory of the project, whose directory names it without -p")
	force := fs.Bool("force", false, "remove workloads that belong to a file of the workloads directory")
	volumes := fs.Bool("volumes", false, "remove the project's named volumes too (kept otherwise)")
	stale := fs.Bool("stale", false, "take down now every project whose client is gone (flyd run, a test's, an up --lease run out)")
	pos, err := c.Parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return cli.Usagef("unexpected argument %q", pos[0])
	}
	if *stale {
		if len(files) > 0 || c.Project != "" {
			return cli.Usagef("--stale takes down every stale project: no -p, no -f")
		}
		return downStale(ctx, c)
	}
	project, err := projectName(c, files)
	if err != nil {
		return err
	}
	ch, err := c.Client.Down(ctx, project, api.RemoveOptions{Force: *force, Volumes: *volumes})
	if err != nil {
		return err
	}
	return reportChange(c, ch)
}

// downStale takes down the projects whose client is gone, and says
// which.
func downStale(ctx context.Context, c *cli.Env) error {
	chs, err := c.Client.DownStale(ctx)
	if c.JSON {
		if err := printJSON(c.Stdout, chs); err != nil {
			return err
		}
		return err
	}
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(chs)) {
		fmt.Fprintf(c.Stdout, "project %s: its client is gone\n", name)
		if ch := chs[name]; ch != nil {
			if err := reportChange(c, ch); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if len(chs) == 0 && err == nil {
		fmt.Fprintln(c.Stdout, "no stale project")
	}
	return errors.Join(append(errs, err)...)
}

// cmdRun is the CI verb: the project up and ready, CMD run once in it as
// a consumer of every workload's endpoints (the environment `uses` gives),
// its output streamed; then the project down, unless --keep. The project
// is bound to this process from before its up (a hold): killed, its
// project goes after the grace. The exit status is CMD's, 1 naming what
// did not come up or what of the project failed while CMD ran, or 128+N
// for a signal that ended the run. All run says of its own goes to
// stderr: stdout is CMD's.
func cmdRun(ctx context.Context, c *cli.Env, args []string) error {
	fs := c.Flags()
	pf := addProjectFlags(fs)
	keep := fs.Bool("keep", false, "leave the project up afterwards")
	volumes := fs.Bool("volumes", false, "remove the project's named volumes too when taking it down")
	network := fs.String("network", "", "the project's network to run CMD in (default: its only isolated network, else the host's)")
	exitOnFailure := fs.Bool("exit-on-failure", true, "stop CMD and the run when a workload of the project fails while CMD runs")
	grace := fs.Duration("grace", 0, "how long the project outlives this process if it is killed (default 10s)")
	cmdArgs, err := c.ParseCommand(fs, args)
	if err != nil {
		return err
	}
	if len(cmdArgs) > 0 && cmdArgs[0] == "--" {
		cmdArgs = cmdArgs[1:]
	}
	if len(pf.files) == 0 || len(cmdArgs) == 0 {
		return cli.Usagef("-f and a command are needed")
	}
	project, err := projectName(c, pf.files)
	if err != nil {
		return err
	}
	ctx, got, stopSignals := interrupts(ctx, c, project)
	defer stopSignals()
	exit := func(err error) error {
		if s, ok := got(); ok {
			what := "taken down"
			if *keep {
				what = "kept"
			}
			fmt.Fprintf(c.Stderr, "flyd run: %s: project %s is %s\n", s, project, what)
			return cli.ExitError{Code: 128 + int(s)}
		}
		return err
	}
	release, err := c.Client.Hold(ctx, project, api.LeaseOptions{Grace: *grace, Volumes: *volumes})
	if err != nil {
		return exit(err)
	}
	if *keep {
		// Kept: bound to no one once the run ends.
		defer func() {
			release()
			lease, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			if err := c.Client.Lease(lease, project, api.LeaseOptions{}); err != nil {
				fmt.Fprintf(c.Stderr, "flyd run: project %s is kept, but still bound to this run: %v\n", project, err)
			}
		}()
	} else {
		defer func() {
			// Torn down even when interrupted: on a context of its own;
			// the hold ends once the project is gone.
			defer release()
			down, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
			defer cancel()
			if _, err := c.Client.Down(down, project, api.RemoveOptions{Volumes: *volumes}); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
				fmt.Fprintf(c.Stderr, "flyd run: taking project %s down: %v\n", project, err)
			}
		}()
	}
	// What up and its wait say goes to stderr, with the rest of run's own.
	quiet := *c
	quiet.Stdout = c.Stderr
	names, err := up(ctx, &quiet, project, pf, true)
	if err != nil {
		return exit(fmt.Errorf("project %s did not come up: %w", project, err))
	}
	dir, _ := os.Getwd()
	w, err := c.Client.Consumer(ctx, project, *network, dir, cmdArgs)
	if err != nil {
		return exit(err)
	}
	cmdCtx, cancelCmd := context.WithCancelCause(ctx)
	defer cancelCmd(nil)
	if *exitOnFailure {
		watchFailures(cmdCtx, c, project, spec.FullName(project, w.Name), cancelCmd)
	}
	code, err := c.Client.RunOnce(cmdCtx, w, c.Stdout)
	var failed *projectFailure
	if errors.As(context.Cause(cmdCtx), &failed) {
		showLogs(c, context.WithoutCancel(ctx), []string{failed.name}, map[string]api.Workload{failed.name: {}})
		return exit(fmt.Errorf("%s (the command was stopped; --exit-on-failure=false lets it run on)", failed))
	}
	if err != nil {
		return exit(err)
	}
	if code != 0 {
		notUp(ctx, c, names)
		return exit(cli.ExitError{Code: code})
	}
	return exit(nil)
}

// interrupts catches SIGINT and SIGTERM for a command that takes down a
// project it holds (run, up --attach): the first cancels the context it
// answers, the command then takes the project down, and got says which
// signal came; a second does not wait for the teardown and exits at once,
// 128+N, leaving the project to the daemon, which takes it down once its
// grace is over (the project is bound to this process).
func interrupts(ctx context.Context, c *cli.Env, project string) (_ context.Context, got func() (syscall.Signal, bool), stop func()) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	ctx, interrupt := context.WithCancel(ctx)
	var first atomic.Value
	go func() {
		select {
		case s := <-sigs:
			first.Store(s)
			interrupt()
		case <-ctx.Done():
			// The caller's context ends with the signal too (cli.Main's):
			// the signal is here already when it does.
			select {
			case s := <-sigs:
				first.Store(s)
			default:
				return
			}
		}
		s := (<-sigs).(syscall.Signal)
		fmt.Fprintf(c.Stderr, "flyd %s: %s again: exiting now; the daemon takes project %s down once its grace is over\n", c.Name, s, project)
		os.Exit(128 + int(s))
	}()
	return ctx, func() (syscall.Signal, bool) {
			s, ok := first.Load().(syscall.Signal)
			return s, ok
		}, func() {
			signal.Stop(sigs)
			interrupt()
		}
}

// projectFailure is a workload of the project that failed while run's
// command ran.
type projectFailure struct{ name, what string }

func (f *projectFailure) Error() string { return f.name + " " + f.what + " while the command ran" }

// watchFailures calls stop with the first workload of project, other than
// the command's (self), that fails while ctx lasts: one that ends failed,
// or whose run ends with an error (an exit status, a signal).
func watchFailures(ctx context.Context, c *cli.Env, project, self string, stop context.CancelCauseFunc) {
	evs, err := c.Client.ProjectEvents(ctx, 0, project)
	if err != nil {
		fmt.Fprintf(c.Stderr, "flyd run: the project's failures are not watched: %v\n", err)
		return
	}
	go func() {
		for ev := range evs {
			if ev.Workload == "" || ev.Workload == self {
				continue
			}
			switch {
			case ev.Type == api.EventState && ev.State == api.StateFailed:
				stop(&projectFailure{ev.Workload, "failed: " + ev.Message})
				return
			case ev.Type == api.EventExit && ev.Exit != nil && !ev.Exit.Unknown && (ev.Exit.Code != 0 || ev.Exit.Signal != ""):
				stop(&projectFailure{ev.Workload, "ended: " + ev.Exit.Description})
				return
			}
		}
	}()
}

// notUp shows the end of the log of each workload of names that is not up
// now: after a command failed, what may have failed it.
func notUp(ctx context.Context, c *cli.Env, names []string) {
	ws, err := c.Client.List(ctx)
	if err != nil {
		return
	}
	by := map[string]api.Workload{}
	var down []string
	for _, w := range ws {
		by[w.Name] = w
		if slices.Contains(names, w.Name) && !w.Up {
			down = append(down, w.Name)
		}
	}
	showLogs(c, ctx, down, by)
}
