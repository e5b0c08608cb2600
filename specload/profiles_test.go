package specload

import (
	"reflect"
	"strings"
	"testing"

	"github.com/flyd-dev/flyd/spec"
)

func TestProfiles(t *testing.T) {
	tests := []struct {
		flags []string
		env   string
		want  []string
		err   string
	}{
		{nil, "", nil, ""},
		{nil, "debug, ci ,,", []string{"debug", "ci"}, ""},
		{[]string{"tools"}, "debug", []string{"tools"}, ""}, // the flags win
		{[]string{"*"}, "", []string{"*"}, ""},
		{[]string{"Debug"}, "", nil, `profile "Debug": a profile's name must be`},
		{nil, "a,b_c", nil, `profile "b_c"`},
	}
	for _, tc := range tests {
		got, err := Profiles(tc.flags, tc.env)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Profiles(%q, %q): %v, want %q", tc.flags, tc.env, err, tc.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Profiles(%q, %q) = %q, %v; want %q", tc.flags, tc.env, got, err, tc.want)
		}
	}
}

func docs(t *testing.T, yaml string) *spec.Documents {
	t.Helper()
	d, err := spec.ParseAll([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

const stack = `
- {name: db, command: [/bin/db]}
- {name: app, command: [/bin/app], uses: [db]}
- {name: debug, command: [/bin/dbg], profiles: [debug], after: [app]}
- {name: seed, command: [/bin/seed], profiles: [ci, debug], after: ["db:started"]}
- {name: ui, command: [/bin/ui], profiles: [debug], uses: [debug/http]}
`

func names(ws []*spec.Workload) []string {
	out := []string{}
	for _, w := range ws {
		out = append(out, w.Name)
	}
	return out
}

func TestSelect(t *testing.T) {
	tests := []struct {
		profiles []string
		in       []string
		out      []string
		unused   []string
	}{
		{nil, []string{"db", "app"}, []string{"debug", "seed", "ui"}, nil},
		{[]string{"ci"}, []string{"db", "app", "seed"}, []string{"debug", "ui"}, nil},
		{[]string{"debug"}, []string{"db", "app", "debug", "seed", "ui"}, nil, nil},
		{[]string{"ci", "nope"}, []string{"db", "app", "seed"}, []string{"debug", "ui"}, []string{"nope"}},
		{[]string{"*"}, []string{"db", "app", "debug", "seed", "ui"}, nil, nil},
	}
	for _, tc := range tests {
		d := docs(t, stack)
		sel, err := Select(d, tc.profiles)
		if err != nil {
			t.Errorf("%q: %v", tc.profiles, err)
			continue
		}
		var out []string
		for _, l := range sel.LeftOut {
			out = append(out, l.Name)
		}
		if !reflect.DeepEqual(names(d.Workloads), tc.in) || !reflect.DeepEqual(out, tc.out) || !reflect.DeepEqual(sel.Unused, tc.unused) {
			t.Errorf("%q: in %q, out %q, unused %q; want %q, %q, %q", tc.profiles, names(d.Workloads), out, sel.Unused, tc.in, tc.out, tc.unused)
		}
	}
	d := docs(t, stack)
	if sel, _ := Select(d, nil); !reflect.DeepEqual(sel.LeftOut[1], LeftOut{Name: "seed", Profiles: []string{"ci", "debug"}}) {
		t.Errorf("left out %+v", sel.LeftOut)
	}
}

// TestSelectRefusesLeftOutDependency: a workload in that names one left
// out is refused, naming both, whether by after or uses, and d is kept.
func TestSelectRefusesLeftOutDependency(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"- {name: a, command: [/bin/a], after: [\"b:completed\"]}\n- {name: b, command: [/bin/b], profiles: [init, seed]}\n",
			"workload a needs b (after or uses), which is left out: none of its profiles (init, seed) is asked for"},
		{"- {name: a, command: [/bin/a], uses: [b/http]}\n- {name: b, command: [/bin/b], profiles: [x]}\n",
			"workload a needs b (after or uses), which is left out"},
	} {
		d := docs(t, tc.yaml)
		_, err := Select(d, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want %q", err, tc.want)
		}
		if len(d.Workloads) != 2 {
			t.Errorf("documents changed on error: %q", names(d.Workloads))
		}
	}
}
