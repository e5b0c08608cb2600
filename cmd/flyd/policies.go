package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/flyd-dev/flyd/api"
	"github.com/flyd-dev/flyd/internal/cli"
	"github.com/flyd-dev/flyd/spec"
)

func init() {
	cli.Register("policies", "list the policies in force, or remove one", "[rm NAME]", cmdPolicies)
	cli.Register("workspaces", "list the workspace documents, or remove one", "[rm NAME]", cmdWorkspaces)
}

func cmdPolicies(ctx context.Context, c *cli.Env, args []string) error {
	pos, err := c.Parse(c.Flags(), args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) == 2 && pos[0] == "rm":
		name := c.FullName(pos[1])
		if err := c.Client.DeletePolicy(ctx, name); err != nil {
			return err
		}
		return removed(c, "policy", name)
	case len(pos) > 0:
		return cli.Usagef("unexpected argument %q", pos[0])
	}
	ps, err := c.Client.Policies(ctx)
	if err != nil {
		return err
	}
	if c.Project != "" {
		ps = slices.DeleteFunc(ps, func(p api.Policy) bool { return !c.InProject(p.Name) })
	}
	if c.JSON {
		return printJSON(c.Stdout, ps)
	}
	tw := tabwriter.NewWriter(c.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "POLICY\tGUARDS\tINGRESS\tEGRESS\tNOT IN FORCE")
	for _, p := range ps {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", p.Name, list(p.Guards), direction(p.Spec.Ingress != nil, ingressRules(p)), direction(p.Spec.Egress != nil, egressRules(p)), list(p.Problems))
	}
	return tw.Flush()
}

func list(xs []string) string {
	if len(xs) == 0 {
		return "-"
	}
	return strings.Join(xs, "; ")
}

func ingressRules(p api.Policy) int {
	if p.Spec.Ingress == nil {
		return 0
	}
	return len(*p.Spec.Ingress)
}

func egressRules(p api.Policy) int {
	if p.Spec.Egress == nil {
		return 0
	}
	return len(*p.Spec.Egress)
}

// direction says what a policy does to one direction.
func direction(guarded bool, rules int) string {
	switch {
	case !guarded:
		return "-"
	case rules == 0:
		return "denied"
	}
	return fmt.Sprintf("%d rules", rules)
}

// printPolicyApplied says what an applied policy is in force for, and on
// stderr what of it is not, so that a name of nothing is seen at once.
func printPolicyApplied(stderr, stdout io.Writer, p *api.Policy) {
	fmt.Fprintf(stdout, "policy %s guards %s\n", p.Name, list(p.Guards))
	for _, why := range p.Problems {
		fmt.Fprintf(stderr, "flyd: warning: policy %s: %s\n", p.Name, why)
	}
}

func cmdWorkspaces(ctx context.Context, c *cli.Env, args []string) error {
	pos, err := c.Parse(c.Flags(), args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) == 2 && pos[0] == "rm":
		name := c.FullName(pos[1])
		if err := c.Client.DeleteWorkspace(ctx, name); err != nil {
			return err
		}
		return removed(c, "workspace", name)
	case len(pos) > 0:
		return cli.Usagef("unexpected argument %q", pos[0])
	}
	ws, err := c.Client.Workspaces(ctx)
	if err != nil {
		return err
	}
	if c.Project != "" {
		ws = slices.DeleteFunc(ws, func(w spec.Workspace) bool { return !c.InProject(w.Name) })
	}
	if c.JSON {
		return printJSON(c.Stdout, ws)
	}
	tw := tabwriter.NewWriter(c.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKSPACE\tCONFIGURATIONS\tSECRET")
	for _, w := range ws {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", w.Name, list(slices.Sorted(maps.Keys(w.Configuration))), list(slices.Sorted(maps.Keys(w.SecretConfiguration))))
	}
	return tw.Flush()
}
