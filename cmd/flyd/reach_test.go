package main

import (
	"strings"
	"testing"

	"github.com/flyd-dev/flyd/api"
	"github.com/flyd-dev/flyd/spec"
)

// TestRefusalAdvice: a refusal says what to do for the workload as it is
// now: add the producer to its uses when it names it nowhere; nothing
// when it is admitted now; the endpoint when its uses names another; the
// policy when its uses is a peer's.
func TestRefusalAdvice(t *testing.T) {
	e := api.ReachEndpoint{Workload: "pg", Endpoint: "sql", Declared: true, Admits: []api.ReachAdmit{
		{Workload: "pg", Why: "itself"}, {Workload: "app", Why: "uses: [pg]"},
	}}
	ws := map[string]*api.Workload{
		"pg":    {Name: "pg", Spec: &spec.Workload{Name: "pg"}},
		"app":   {Name: "app", Spec: &spec.Workload{Name: "app", Uses: []string{"pg"}}},
		"side":  {Name: "side", Spec: &spec.Workload{Name: "side"}},
		"admin": {Name: "admin", Spec: &spec.Workload{Name: "admin", Uses: []string{"pg/admin", "cache"}}},
		"peer":  {Name: "peer", AppliedBy: 1000, Spec: &spec.Workload{Name: "peer", Uses: []string{"pg/sql"}}},
	}
	lookup := func(n string) *api.Workload { return ws[n] }
	for consumer, want := range map[string]string{
		"side":     "an undeclared dependency: add pg to its uses, or stop it calling",
		"cgroup 7": "an undeclared dependency: add pg to its uses, or stop it calling",
		"app":      "before it was admitted: uses: [pg]",
		"admin":    "its uses names pg/admin, not this endpoint: add pg/sql, or pg for all of them, to its uses",
		"peer":     "its uses names pg, but it was applied by uid 1000, pg by uid 0: a peer's uses admits it only under a policy that selects pg with from: {users: true, peers: true}",
	} {
		got := refusalAdvice(e, consumer, lookup)
		if got != want {
			t.Errorf("%s: %q, want %q", consumer, got, want)
		}
		if consumer != "side" && consumer != "cgroup 7" && strings.Contains(got, "add pg to its uses") {
			t.Errorf("%s, whose uses names pg, is told to add it: %q", consumer, got)
		}
	}
}
