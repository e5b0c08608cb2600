package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/flyd-dev/flyd/api"
	"github.com/flyd-dev/flyd/cmd/internal/cli"
	"github.com/flyd-dev/flyd/spec"
)

// The policies' view: what each guards, its rules and what of it is not
// in force.
var _ = registerView(spec.KindPolicy, "list the policies in force, or remove one",
	"POLICY\tGUARDS\tINGRESS\tEGRESS\tNOT IN FORCE", func(p api.Policy) string {
		return fmt.Sprintf("%s\t%s\t%s\t%s\t%s", p.Name, list(p.Guards), direction(p.Spec.Ingress != nil, ingressRules(p)),
			direction(p.Spec.Egress != nil, egressRules(p)), list(p.Problems))
	}, func(c *cli.Env, p api.Policy) { printPolicyApplied(c.Stderr, c.Stdout, &p) })

// The workspaces' view: the names of their configurations, never a value.
var _ = registerView(spec.KindWorkspace, "list the workspace documents, or remove one",
	"WORKSPACE\tCONFIGURATIONS\tSECRET", func(w spec.Workspace) string {
		return fmt.Sprintf("%s\t%s\t%s", w.Name, list(slices.Sorted(maps.Keys(w.Configuration))), list(slices.Sorted(maps.Keys(w.SecretConfiguration))))
	}, func(c *cli.Env, w spec.Workspace) {
		fmt.Fprintf(c.Stdout, "workspace %s: %d configurations, %d secret\n", w.Name, len(w.Configuration), len(w.SecretConfiguration))
	})

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
