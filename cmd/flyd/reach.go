package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/flyd-dev/flyd/api"
	"github.com/flyd-dev/flyd/internal/cli"
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
			fmt.Fprintf(c.Stdout, "  refused %s: %d times (an undeclared dependency: add %s to its uses, or stop it calling)\n", r.Workload, r.Count, e.Workload)
		}
	}
	return nil
}
