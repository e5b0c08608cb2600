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

// TestExternalEndpoints: a workload of kind external runs nothing and
// stands for endpoints at the addresses it gives; consumers get codefly's
// values for them (a URL for an HTTP-based API, https kept).
func TestExternalEndpoints(t *testing.T) {
	ext := func(eps ...Endpoint) *Workload {
		return &Workload{Name: "db", Kind: KindExternal, Endpoints: eps}
	}
	for _, tt := range []struct {
		name  string
		w     *Workload
		value string // of the first endpoint; "" for a refusal
		want  string // in the refusal
	}{
		{"tcp", ext(Endpoint{Name: "tcp", Location: LocationExternal, Address: "db.example.com:5432"}), "db.example.com:5432", ""},
		{"http host:port", ext(Endpoint{Name: "http", Location: LocationExternal, Address: "api.example.com:80"}), "http://api.example.com:80", ""},
		{"https URL", ext(Endpoint{Name: "rest", Location: LocationExternal, Address: "https://api.example.com:443"}), "https://api.example.com:443", ""},
		{"ipv6", ext(Endpoint{Name: "tcp", Location: LocationExternal, Address: "[2001:db8::1]:5432"}), "[2001:db8::1]:5432", ""},
		{"a URL for tcp", ext(Endpoint{Name: "tcp", Location: LocationExternal, Address: "https://db:5432"}), "", "a URL is for an HTTP-based API"},
		{"no port", ext(Endpoint{Name: "tcp", Location: LocationExternal, Address: "db.example.com"}), "", "must be host:port"},
		{"port 0", ext(Endpoint{Name: "tcp", Location: LocationExternal, Address: "db:0"}), "", "between 1 and 65535"},
		{"ftp", ext(Endpoint{Name: "http", Location: LocationExternal, Address: "ftp://x:21"}), "", "http or https"},
		{"a port too", ext(Endpoint{Name: "tcp", Location: LocationExternal, Address: "db:5432", Port: FixedPort(5432)}), "", "set neither port nor publish"},
		{"exposed", ext(Endpoint{Name: "tcp", Location: LocationExternal, Address: "db:5432", Visibility: VisibilityPublic, Exposure: ExposurePublic}), "", "exposure-in-system"},
		{"unknown location", ext(Endpoint{Name: "tcp", Location: "cloud", Address: "db:5432"}), "", "location-known"},
		{"an allocated endpoint", ext(Endpoint{Name: "tcp"}), "", "each of its endpoints is location: external"},
		{"a command", &Workload{Name: "db", Kind: KindExternal, Command: []string{"x"}, Endpoints: []Endpoint{{Name: "tcp", Location: LocationExternal, Address: "db:1"}}}, "", "runs nothing"},
		{"external on a native", &Workload{Name: "db", Command: []string{"x"}, Endpoints: []Endpoint{{Name: "tcp", Location: LocationExternal, Address: "db:1"}}}, "", "is for a workload of kind external"},
		{"an address in the system", &Workload{Name: "db", Command: []string{"x"}, Endpoints: []Endpoint{{Name: "tcp", Address: "db:1"}}}, "", "is for a location: external endpoint"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := tt.w.Clone()
			w.SetDefaults()
			err := w.Validate()
			if tt.want != "" {
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Errorf("Validate = %v; want %q in it", err, tt.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if v, err := ExternalAddress(w.Endpoints[0]); err != nil || v != tt.value {
				t.Errorf("ExternalAddress = %q, %v; want %q", v, err, tt.value)
			}
		})
	}
}
