package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/flyd-dev/flyd/api"
	"github.com/flyd-dev/flyd/cmd/internal/cli"
)

func init() {
	cli.RegisterQuery("reach", "each endpoint's derived allow-list, and who was refused", "[NAME]", cmdReach)
}

// cmdReach prints, for each endpoint, who may open a connection to it and
// why each may: its own workload, the workloads whose uses name it, flyd's
// own traffic; then who was refused and how many times.
func cmdReach(ctx context.Context, c *cli.Env, args []string) error {
	pos, err := c.Parse(c.Flags(), args)
	if err != nil {
		return err
	}
	name := ""
	switch {
	case len(pos) == 1:
		name = c.FullName(pos[0])
	case len(pos) > 1:
		return cli.Usagef("unexpected argument %q", pos[1])
	}
	eps, err := c.Client.Reach(ctx, name)
	if err != nil {
		return err
	}
	if c.Project != "" && name == "" {
		eps = slices.DeleteFunc(eps, func(e api.ReachEndpoint) bool { return !c.InProject(e.Workload) })
	}
	if c.JSON {
		return printJSON(c.Stdout, eps)
	}
	// The refused workloads as the daemon has them, for what to advise.
	got := map[string]*api.Workload{}
	lookup := func(name string) *api.Workload {
		if w, ok := got[name]; ok {
			return w
		}
		w, err := c.Client.Get(ctx, name)
		if err != nil {
			w = nil
		}
		got[name] = w
		return w
	}
	for i, e := range eps {
		if i > 0 {
			fmt.Fprintln(c.Stdout)
		}
		where := "port " + strconv.Itoa(e.Port)
		if e.Published != 0 {
			where += ", published " + strconv.Itoa(e.Published)
		}
		if !e.Declared {
			fmt.Fprintf(c.Stdout, "%s/%s (network %s, %s): reach off, every process that reaches the port\n", e.Workload, e.Endpoint, e.Network, where)
			continue
		}
		fmt.Fprintf(c.Stdout, "%s/%s (network %s, %s): reach declared\n", e.Workload, e.Endpoint, e.Network, where)
		for _, a := range e.Admits {
			state := ""
			if !a.Running {
				state = " (not running)"
			}
			fmt.Fprintf(c.Stdout, "  admits %s: %s%s\n", a.Workload, a.Why, state)
		}
		fmt.Fprintf(c.Stdout, "  admits %s\n", api.ReachFlyd)
		for _, r := range e.Refused {
			fmt.Fprintf(c.Stdout, "  refused %s: %d times (%s)\n", r.Workload, r.Count, refusalAdvice(e, r.Workload, lookup))
		}
	}
	return nil
}

// refusalAdvice says why consumer's connections to e were refused, and
// what to do: add e's workload to its uses, unless it is admitted now
// (the refusals counted were before) or its uses already names e's
// workload, for another endpoint or as a peer's uses that does not
// count. lookup gives a workload as the daemon has it, nil when it has
// none (a refused cgroup whose workload is gone).
func refusalAdvice(e api.ReachEndpoint, consumer string, lookup func(string) *api.Workload) string {
	for _, a := range e.Admits {
		if a.Workload == consumer {
			return "before it was admitted: " + a.Why
		}
	}
	undeclared := fmt.Sprintf("an undeclared dependency: add %s to its uses, or stop it calling", e.Workload)
	w := lookup(consumer)
	if w == nil || w.Spec == nil {
		return undeclared
	}
	var others []string
	for _, entry := range w.Spec.Uses {
		name, ep, _ := strings.Cut(entry, "/")
		switch {
		case name != e.Workload:
		case ep == "" || ep == e.Endpoint:
			// Named, yet not admitted: a peer's uses (a caller other
			// than root applied it, and not the producer).
			by := "another user"
			if p := lookup(e.Workload); p != nil {
				by = fmt.Sprintf("uid %d, %s by uid %d", w.AppliedBy, e.Workload, p.AppliedBy)
			}
			return fmt.Sprintf("its uses names %s, but it was applied by %s: a peer's uses admits it only under a policy that selects %s with from: {users: true, peers: true}",
				e.Workload, by, e.Workload)
		default:
			others = append(others, entry)
		}
	}
	if len(others) > 0 {
		return fmt.Sprintf("its uses names %s, not this endpoint: add %s/%s, or %s for all of them, to its uses",
			strings.Join(others, ", "), e.Workload, e.Endpoint, e.Workload)
	}
	return undeclared
}
