package spec

import (
	"slices"
	"strings"
	"testing"
)

// TestQualifyKeepsAWorkloadInItsProject: a workload of a project names its
// network, `after` and `uses` within it, by their bare names; one of the
// default project is unchanged; the host's network is every project's.
func TestQualifyKeepsAWorkloadInItsProject(t *testing.T) {
	for _, tt := range []struct {
		name         string
		in           Workload
		wantName     string
		wantNet      string
		wantAfter    []string
		wantUses     []string
		wantProject  string
		wantProblems []string
	}{
		{name: "default project", in: Workload{Name: "app", Network: "net", After: []string{"pg"}, Uses: []string{"pg/tcp"}},
			wantName: "app", wantNet: "net", wantAfter: []string{"pg"}, wantUses: []string{"pg/tcp"}},
		{name: "stated project", in: Workload{Name: "app", Project: "ci-7", Network: "net", After: []string{"pg:completed"}, Uses: []string{"pg/tcp", "cache"}},
			wantName: "ci-7.app", wantNet: "ci-7.net", wantAfter: []string{"ci-7.pg:completed"}, wantUses: []string{"ci-7.pg/tcp", "ci-7.cache"}, wantProject: "ci-7"},
		{name: "full name", in: Workload{Name: "ci-7.app", Network: NetworkHost, After: []string{"ci-7.pg"}},
			wantName: "ci-7.app", wantNet: NetworkHost, wantAfter: []string{"ci-7.pg"}, wantProject: "ci-7"},
		{name: "another project's names", in: Workload{Name: "app", Project: "ci-7", Network: "ci-8.net", After: []string{"ci-8.pg"}, Uses: []string{"ci-8.pg"}},
			wantProblems: []string{`network: "ci-8.net" is of project "ci-8"`, `after[0]: "ci-8.pg" is of project "ci-8"`, `uses[0]: "ci-8.pg" is of project "ci-8"`}},
		{name: "a name of another project than stated", in: Workload{Name: "ci-8.app", Project: "ci-7"},
			wantProblems: []string{`name: is of project "ci-8", and the workload states project "ci-7"`}},
		{name: "a project not a label", in: Workload{Name: "app", Project: "CI_7"}, wantProblems: []string{"project: must be"}},
		{name: "three parts", in: Workload{Name: "a.b.c"}, wantProblems: []string{"name: must be"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := tt.in.Clone()
			w.Command = []string{"/bin/true"}
			w.SetDefaults()
			if w.Network == "" {
				w.Network = NetworkHost
			}
			err := w.Validate()
			if len(tt.wantProblems) > 0 {
				for _, want := range tt.wantProblems {
					if err == nil || !strings.Contains(err.Error(), want) {
						t.Errorf("Validate = %v; want %q in it", err, want)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			w.Qualify()
			if w.Name != tt.wantName || w.Network != tt.wantNet || !slices.Equal(w.After, tt.wantAfter) || !slices.Equal(w.Uses, tt.wantUses) || w.Project != tt.wantProject {
				t.Errorf("Qualify = %s in %s, after %v, uses %v, project %q; want %s in %s, after %v, uses %v, project %q",
					w.Name, w.Network, w.After, w.Uses, w.Project, tt.wantName, tt.wantNet, tt.wantAfter, tt.wantUses, tt.wantProject)
			}
			if err := w.Validate(); err != nil {
				t.Errorf("the qualified workload does not validate: %v", err)
			}
			again := w.Clone()
			again.Qualify()
			if again.Name != w.Name || !slices.Equal(again.After, w.After) || !slices.Equal(again.Uses, w.Uses) {
				t.Errorf("Qualify twice = %+v; want the same as once", again)
			}
		})
	}
}

// TestSetProject: a document read for -p takes its project, unless it
// states another, by its `project` or its full name.
func TestSetProject(t *testing.T) {
	for _, tt := range []struct {
		project, name, stated string
		ok                    bool
	}{
		{"ci-7", "app", "", true}, {"ci-7", "app", "ci-7", true}, {"ci-7", "ci-7.app", "", true},
		{"ci-7", "app", "ci-8", false}, {"ci-7", "ci-8.app", "", false},
	} {
		w := &Workload{Name: tt.name, Project: tt.stated}
		if err := w.SetProject(tt.project); (err == nil) != tt.ok {
			t.Errorf("SetProject(%q) of %s (project %q) = %v; want ok %v", tt.project, tt.name, tt.stated, err, tt.ok)
		}
	}
}

// TestPolicyQualify: a policy's bare names are its project's, full names
// another project's as written.
func TestPolicyQualify(t *testing.T) {
	in := []IngressRule{{From: Peers{Workloads: []string{"app"}, Networks: []string{"ci-8.net"}, CIDRs: []string{"10.0.0.0/8"}}}}
	p := &Policy{Kind: KindPolicy, Name: "db", Project: "ci-7", Select: Selector{Workloads: []string{"pg"}, Networks: []string{"net"}}, Ingress: &in}
	c := p.Clone()
	c.Qualify()
	got := []string{c.Name, c.Select.Workloads[0], c.Select.Networks[0], (*c.Ingress)[0].From.Workloads[0], (*c.Ingress)[0].From.Networks[0], (*c.Ingress)[0].From.CIDRs[0]}
	want := []string{"ci-7.db", "ci-7.pg", "ci-7.net", "ci-7.app", "ci-8.net", "10.0.0.0/8"}
	if !slices.Equal(got, want) {
		t.Errorf("Qualify = %v; want %v", got, want)
	}
	if p.Name != "db" || (*p.Ingress)[0].From.Workloads[0] != "app" {
		t.Errorf("Qualify of a clone changed the original: %+v", p)
	}
}

func TestSplitName(t *testing.T) {
	for full, want := range map[string][2]string{"app": {"", "app"}, "ci-7.app": {"ci-7", "app"}} {
		if p, n := SplitName(full); p != want[0] || n != want[1] || FullName(p, n) != full {
			t.Errorf("SplitName(%q) = %q, %q; want %q", full, p, n, want)
		}
	}
}
