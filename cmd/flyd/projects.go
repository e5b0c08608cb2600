package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/flyd-dev/flyd/api"
	"github.com/flyd-dev/flyd/internal/cli"
	"github.com/flyd-dev/flyd/spec"
)

func init() {
	cli.Register("up", "make a project what its files say: apply them, remove what they no longer hold",
		"[-p PROJECT] -f FILE|DIR [-f ...] [--profile P] [--env-file F] [--wait [--timeout 1m]] [--watch] [--start=false]", cmdUp)
	cli.Register("down", "remove everything of a project: workloads, networks, policies (and named volumes with --volumes)", "[-p PROJECT | -f DIR] [--volumes]", cmdDown)
	cli.Register("run", "bring a project up, run a command in it, and take it down",
		"[-p PROJECT] -f FILE|DIR [-f ...] [--keep] [--volumes] [--network NET] [--timeout 1m] [--] CMD [ARGS...]", cmdRun)
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

// projectName is -p's project, or FLYD_PROJECT's, or else the name of the
// directory of the first file, made a DNS label, as compose names a
// project after its directory.
func projectName(c *cli.Env, files []string) (string, error) {
	name := c.Project
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
	} else {
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
	var errs []error
	if err := report(c, "apply", ch.Applied, nil); err != nil {
		errs = append(errs, err)
	}
	if err := report(c, "remove", ch.Removed, nil); err != nil {
		errs = append(errs, err)
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
	_, err = up(ctx, c, project, pf, *wait)
	return err
}

func cmdDown(ctx context.Context, c *cli.Env, args []string) error {
	fs := c.Flags()
	var files stringList
	fs.Var(&files, "f", "a file or directory of the project, whose directory names it without -p")
	force := fs.Bool("force", false, "remove workloads that belong to a file of the workloads directory")
	volumes := fs.Bool("volumes", false, "remove the project's named volumes too (kept otherwise)")
	pos, err := c.Parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return cli.Usagef("unexpected argument %q", pos[0])
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

// cmdRun is the CI verb: the project up and ready, CMD run once in it as
// a consumer of every workload's endpoints (the environment `uses` gives),
// its output streamed; then the project down, unless --keep. The exit
// status is CMD's, or 1 naming what did not come up. An interrupt tears
// down too.
func cmdRun(ctx context.Context, c *cli.Env, args []string) error {
	fs := c.Flags()
	pf := addProjectFlags(fs)
	keep := fs.Bool("keep", false, "leave the project up afterwards")
	volumes := fs.Bool("volumes", false, "remove the project's named volumes too when taking it down")
	network := fs.String("network", "", "the project's network to run CMD in (default: its only isolated network, else the host's)")
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
	if !*keep {
		defer func() {
			// Torn down even when interrupted: on a context of its own.
			down, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
			defer cancel()
			if _, err := c.Client.Down(down, project, api.RemoveOptions{Volumes: *volumes}); err != nil {
				fmt.Fprintf(c.Stderr, "flyd run: taking project %s down: %v\n", project, err)
			}
		}()
	}
	names, err := up(ctx, c, project, pf, true)
	if err != nil {
		return fmt.Errorf("project %s did not come up: %w", project, err)
	}
	dir, _ := os.Getwd()
	w, err := c.Client.Consumer(ctx, project, *network, dir, cmdArgs)
	if err != nil {
		return err
	}
	code, err := c.Client.RunOnce(ctx, w, c.Stdout)
	if err != nil {
		return err
	}
	if code != 0 {
		notUp(ctx, c, names)
		return cli.ExitError{Code: code}
	}
	return nil
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
