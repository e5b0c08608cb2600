package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/flyd-dev/flyd/api"
	"github.com/flyd-dev/flyd/spec"
)

func init() {
	register("apply", command{"create or replace workloads from spec files", "-f FILE|DIR|- [-f ...] [--start=false] [--force]", cmdApply})
	register("ps", command{"list workloads", "", cmdPs})
	register("inspect", command{"show a workload as JSON", "NAME", cmdInspect})
	register("start", command{"start workloads", "NAME...|--all", lifecycleCmd("start", (*api.Client).Start)})
	register("stop", command{"stop workloads", "NAME...|--all", lifecycleCmd("stop", (*api.Client).Stop)})
	register("restart", command{"restart workloads", "NAME...|--all", lifecycleCmd("restart", (*api.Client).Restart)})
	register("rm", command{"stop and remove workloads", "NAME...|--all [--force]", cmdRm})
	register("status", command{"show the daemon's status", "", cmdStatus})
}

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

func cmdApply(ctx context.Context, c *cli, args []string) error {
	fs := c.flags()
	var files stringList
	fs.Var(&files, "f", "spec file, directory of spec files, or - for stdin (repeatable)")
	start := fs.Bool("start", true, "start the workloads")
	force := fs.Bool("force", false, "change workloads that belong to a file of the workloads directory")
	pos, err := c.parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	if len(files) == 0 {
		return usagef("-f is required")
	}
	var specs []*spec.Workload
	for _, f := range files {
		ws, err := readSpecs(f)
		if err != nil {
			return err
		}
		specs = append(specs, ws...)
	}
	if err := uniqueNames(specs); err != nil {
		return err
	}
	// Dependencies first: `after` may only name workloads that exist.
	levels, err := spec.Order(specs)
	if err != nil {
		return err
	}
	var failed []error
	for _, level := range levels {
		byName := make(map[string]*spec.Workload, len(level))
		names := make([]string, len(level))
		for i, w := range level {
			byName[w.Name], names[i] = w, w.Name
		}
		err := c.each(ctx, "apply", names, func(name string) (*api.Workload, error) {
			stop := c.showProgress(ctx, name)
			w, err := c.client.Apply(ctx, byName[name], api.ApplyOptions{Start: *start, Force: *force})
			stop()
			if err == nil && w.State == api.StateFailed {
				// Applied, but it cannot run: the user must hear why.
				err = fmt.Errorf("failed: %s", w.LastError)
			}
			return w, err
		})
		if err != nil {
			failed = append(failed, err)
		}
	}
	return errors.Join(failed...)
}

// readSpecs reads a spec file, every *.yaml, *.yml and *.json file of a
// directory, or stdin.
func readSpecs(path string) ([]*spec.Workload, error) {
	if path == "-" {
		b, err := io.ReadAll(os.Stdin)
		if err != nil {
			return nil, err
		}
		ws, err := spec.Parse(b)
		if err != nil {
			return nil, fmt.Errorf("stdin: %w", err)
		}
		return ws, nil
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return spec.ParseFile(path)
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, err
	}
	var out []*spec.Workload
	for _, e := range entries {
		switch filepath.Ext(e.Name()) {
		case ".yaml", ".yml", ".json":
		default:
			continue
		}
		if e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		ws, err := spec.ParseFile(filepath.Join(path, e.Name()))
		if err != nil {
			return nil, err
		}
		out = append(out, ws...)
	}
	return out, nil
}

func uniqueNames(ws []*spec.Workload) error {
	seen := map[string]bool{}
	for _, w := range ws {
		if seen[w.Name] {
			return fmt.Errorf("workload %q is defined twice", w.Name)
		}
		seen[w.Name] = true
	}
	return nil
}

// forEach runs f for 0..n-1 with bounded concurrency: the daemon serves
// requests in parallel, so a directory of specs applies in parallel.
func forEach(n int, f func(i int)) {
	sem := make(chan struct{}, 32)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			f(i)
		}()
	}
	wg.Wait()
}

func compact(ws []*api.Workload) []*api.Workload {
	out := []*api.Workload{}
	for _, w := range ws {
		if w != nil {
			out = append(out, w)
		}
	}
	return out
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func cmdPs(ctx context.Context, c *cli, args []string) error {
	pos, err := c.parse(c.flags(), args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	ws, err := c.client.List(ctx)
	if err != nil {
		return err
	}
	return c.output(ws, func(w io.Writer) { printWorkloads(w, ws) })
}

func cmdInspect(ctx context.Context, c *cli, args []string) error {
	pos, err := c.parse(c.flags(), args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("one workload name is needed")
	}
	w, err := c.client.Get(ctx, pos[0])
	if err != nil {
		return err
	}
	return printJSON(c.stdout, w)
}

func cmdStatus(ctx context.Context, c *cli, args []string) error {
	if _, err := c.parse(c.flags(), args); err != nil {
		return err
	}
	st, err := c.client.Status(ctx)
	if err != nil {
		return err
	}
	return c.output(st, func(w io.Writer) { printStatus(w, st) })
}

// output prints v as JSON with --json, else as human prints it.
func (c *cli) output(v any, human func(io.Writer)) error {
	if c.json {
		return printJSON(c.stdout, v)
	}
	human(c.stdout)
	return nil
}

// names resolves NAME... or --all to workload names.
func (c *cli) names(ctx context.Context, pos []string, all bool) ([]string, error) {
	if all {
		if len(pos) > 0 {
			return nil, usagef("names and --all cannot be used together")
		}
		ws, err := c.client.List(ctx)
		if err != nil {
			return nil, err
		}
		names := make([]string, len(ws))
		for i, w := range ws {
			names[i] = w.Name
		}
		return names, nil
	}
	if len(pos) == 0 {
		return nil, usagef("name a workload, or use --all")
	}
	return pos, nil
}

// each runs op on every named workload in parallel and reports each
// failure; the command fails if any did.
func (c *cli) each(ctx context.Context, verb string, names []string, op func(string) (*api.Workload, error)) error {
	results := make([]*api.Workload, len(names))
	errs := make([]error, len(names))
	forEach(len(names), func(i int) { results[i], errs[i] = op(names[i]) })
	var failed []string
	for i, err := range errs {
		if err != nil {
			fmt.Fprintf(c.stderr, "%s: %s\n", names[i], err)
			failed = append(failed, names[i])
		}
	}
	if c.json {
		if err := printJSON(c.stdout, compact(results)); err != nil {
			return err
		}
	} else {
		for _, w := range results {
			if w != nil {
				fmt.Fprintf(c.stdout, "%s %s\n", w.Name, w.State)
			}
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("could not %s %s", verb, strings.Join(failed, ", "))
	}
	return nil
}

func lifecycleCmd(verb string, op func(*api.Client, context.Context, string) (*api.Workload, error)) func(context.Context, *cli, []string) error {
	return func(ctx context.Context, c *cli, args []string) error {
		fs := c.flags()
		all := fs.Bool("all", false, "every workload")
		pos, err := c.parse(fs, args)
		if err != nil {
			return err
		}
		names, err := c.names(ctx, pos, *all)
		if err != nil {
			return err
		}
		return c.each(ctx, verb, names, func(n string) (*api.Workload, error) { return op(c.client, ctx, n) })
	}
}

func cmdRm(ctx context.Context, c *cli, args []string) error {
	fs := c.flags()
	all := fs.Bool("all", false, "every workload")
	force := fs.Bool("force", false, "remove workloads that belong to a file of the workloads directory")
	pos, err := c.parse(fs, args)
	if err != nil {
		return err
	}
	names, err := c.names(ctx, pos, *all)
	if err != nil {
		return err
	}
	sort.Strings(names)
	return c.each(ctx, "remove", names, func(n string) (*api.Workload, error) {
		if err := c.client.Remove(ctx, n, api.RemoveOptions{Force: *force}); err != nil {
			return nil, err
		}
		return &api.Workload{Name: n, State: "removed"}, nil
	})
}
