package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/flyd-dev/flyd/api"
	"github.com/flyd-dev/flyd/internal/cli"
	"github.com/flyd-dev/flyd/spec"
)

func init() {
	cli.Register("policies", "list the policies in force, or remove one", "[rm NAME]", cmdPolicies)
	cli.Register("workspaces", "list the workspace documents, or remove one", "[rm NAME]", cmdWorkspaces)
}

func cmdPolicies(ctx context.Context, c *cli.Env, args []string) error {
	return documentsCmd(ctx, c, args, "policy", (*api.Client).DeletePolicy, (*api.Client).Policies, func(p api.Policy) string { return p.Name },
		"POLICY\tGUARDS\tINGRESS\tEGRESS\tNOT IN FORCE", func(p api.Policy) string {
			return fmt.Sprintf("%s\t%s\t%s\t%s\t%s", p.Name, list(p.Guards), direction(p.Spec.Ingress != nil, ingressRules(p)),
				direction(p.Spec.Egress != nil, egressRules(p)), list(p.Problems))
		})
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
	return documentsCmd(ctx, c, args, "workspace", (*api.Client).DeleteWorkspace, (*api.Client).Workspaces, func(w spec.Workspace) string { return w.Name },
		"WORKSPACE\tCONFIGURATIONS\tSECRET", func(w spec.Workspace) string {
			return fmt.Sprintf("%s\t%s\t%s", w.Name, list(slices.Sorted(maps.Keys(w.Configuration))), list(slices.Sorted(maps.Keys(w.SecretConfiguration))))
		})
}
