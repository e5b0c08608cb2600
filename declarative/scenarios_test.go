package declarative

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var scenarios = []scenario{
	{
		name: "create edit rewrite remove",
		steps: []step{
			{name: "create", do: write("a.yaml", wl("x", "v1")), state: "x a.yaml /bin/v1"},
			{name: "edit", do: write("a.yaml", wl("x", "v2")), state: "x a.yaml /bin/v2"},
			{name: "identical rewrite", do: write("a.yaml", wl("x", "v2")), state: "x a.yaml /bin/v2"},
			{name: "second file", do: write("b.json", `{"name": "y", "command": ["/bin/v1"]}`), state: "x a.yaml /bin/v2\ny b.json /bin/v1"},
			{name: "remove", do: remove("a.yaml"), state: "y b.json /bin/v1"},
		},
	},
	{
		name:  "a file stops defining a workload",
		files: map[string]string{"a.yaml": wl("x", "v1") + "---\n" + wl("y", "v1")},
		steps: []step{
			{name: "start", do: nothing, state: "x a.yaml /bin/v1\ny a.yaml /bin/v1"},
			{name: "drop y", do: write("a.yaml", wl("x", "v1")), state: "x a.yaml /bin/v1"},
		},
	},
	{
		name: "syntax error keeps the old workload until fixed",
		steps: []step{
			{name: "create", do: write("a.yaml", wl("x", "v1")), state: "x a.yaml /bin/v1"},
			{name: "break", do: write("a.yaml", "name: x\ncommand: [/bin/v2\n"), state: "x a.yaml /bin/v1",
				problems: map[string]string{"a.yaml": "malformed YAML"}},
			{name: "fix", do: write("a.yaml", wl("x", "v3")), state: "x a.yaml /bin/v3",
				events: []string{"malformed YAML", "a.yaml: ok"}},
		},
	},
	{
		name: "unknown key is refused with its path",
		steps: []step{
			{name: "create", do: write("a.yaml", wl("x", "v1")), state: "x a.yaml /bin/v1"},
			{name: "typo", do: write("a.yaml", wl("x", "v2")+"restart: {polcy: always}\n"), state: "x a.yaml /bin/v1",
				problems: map[string]string{"a.yaml": "restart.polcy: unknown field"}},
			{name: "new file with typo", do: write("b.yaml", wl("y", "v1")+"prot: 1\n"), state: "x a.yaml /bin/v1",
				problems: map[string]string{"a.yaml": "restart.polcy", "b.yaml": "prot: unknown field"}},
		},
	},
	{
		name: "invalid spec is refused",
		steps: []step{
			{name: "bad name", do: write("a.yaml", wl("Bad_Name", "v1")), state: "",
				problems: map[string]string{"a.yaml": "name: must be"}},
		},
	},
	{
		name: "two files define one name",
		steps: []step{
			{name: "create", do: write("a.yaml", wl("x", "v1")), state: "x a.yaml /bin/v1"},
			{name: "clash", do: write("b.yaml", wl("x", "v2")+"---\n"+wl("y", "v1")), state: "x a.yaml /bin/v1\ny b.yaml /bin/v1",
				problems: map[string]string{"a.yaml": `"x" is defined in a.yaml and b.yaml`, "b.yaml": `"x" is defined in a.yaml and b.yaml`}},
			{name: "remove the newcomer", do: remove("b.yaml"), state: "x a.yaml /bin/v1",
				events: []string{"a.yaml: ok", "b.yaml: ok"}},
			{name: "both new", do: func(t *testing.T, e *env) {
				writeFile(t, e.dir, "c.yaml", wl("z", "v1"))
				writeFile(t, e.dir, "d.yaml", wl("z", "v2"))
			}, state: "x a.yaml /bin/v1",
				problems: map[string]string{"c.yaml": "defined in c.yaml and d.yaml", "d.yaml": "defined in c.yaml and d.yaml"}},
			{name: "one left", do: remove("c.yaml"), state: "x a.yaml /bin/v1\nz d.yaml /bin/v2"},
		},
	},
	{
		name: "editor rename dance",
		steps: []step{
			{name: "write tmp then rename", do: func(t *testing.T, e *env) {
				writeFile(t, e.dir, ".x.yaml.tmp", wl("x", "v1"))
				rename(t, e.dir, ".x.yaml.tmp", "x.yaml")
			}, state: "x x.yaml /bin/v1"},
			{name: "again over it", do: func(t *testing.T, e *env) {
				writeFile(t, e.dir, ".x.yaml.tmp", wl("x", "v2"))
				rename(t, e.dir, ".x.yaml.tmp", "x.yaml")
			}, state: "x x.yaml /bin/v2", check: onlyOwner("x.yaml")},
		},
	},
	{
		name:  "a workload moves to another file",
		files: map[string]string{"a.yaml": wl("x", "v1")},
		steps: []step{
			{name: "start", do: nothing, state: "x a.yaml /bin/v1"},
			{name: "move", do: func(t *testing.T, e *env) {
				writeFile(t, e.dir, "a.yaml", wl("y", "v1"))
				writeFile(t, e.dir, "b.yaml", wl("x", "v2"))
			}, state: "x b.yaml /bin/v2\ny a.yaml /bin/v1"},
		},
	},
	{
		name:  "a move waits for the delete",
		files: map[string]string{"a.yaml": wl("x", "v1")},
		steps: []step{
			{name: "start", do: nothing, state: "x a.yaml /bin/v1"},
			{name: "move while delete fails", do: func(t *testing.T, e *env) {
				e.fake.setFailures(nil, map[string]error{"x": errDiskFull})
				remove("a.yaml")(t, e)
				writeFile(t, e.dir, "b.yaml", wl("x", "v2"))
			}, state: "x a.yaml /bin/v1", problems: map[string]string{"a.yaml": `delete workload "x": disk full`}},
			{name: "heal", do: heal, state: "x b.yaml /bin/v2"},
		},
	},
	{
		name:  "a workload created through the API is not taken",
		owned: map[string]string{"manual": ""},
		steps: []step{
			{name: "file claims it", do: write("a.yaml", wl("manual", "v1")), state: "manual (api) /bin/adopted",
				problems: map[string]string{"a.yaml": `apply workload "manual": conflict`}},
			{name: "file removed", do: remove("a.yaml"), state: "manual (api) /bin/adopted"},
		},
	},
	{
		name:  "vim write",
		files: map[string]string{"x.yaml": wl("x", "v1")},
		steps: []step{
			{name: "start", do: nothing, state: "x x.yaml /bin/v1"},
			{name: "save", do: func(t *testing.T, e *env) {
				writeFile(t, e.dir, "4913", "")
				if err := os.Remove(filepath.Join(e.dir, "4913")); err != nil {
					t.Fatal(err)
				}
				writeFile(t, e.dir, ".x.yaml.swp", "swap")
				rename(t, e.dir, "x.yaml", "x.yaml~")
				writeFile(t, e.dir, "x.yaml", wl("x", "v2"))
				if err := os.Remove(filepath.Join(e.dir, "x.yaml~")); err != nil {
					t.Fatal(err)
				}
			}, state: "x x.yaml /bin/v2", check: onlyOwner("x.yaml")},
		},
	},
	{
		name:       "directory missing at start",
		missingDir: true,
		steps: []step{
			{name: "start", do: nothing, state: ""},
			{name: "created", do: func(t *testing.T, e *env) {
				if err := os.MkdirAll(e.dir, 0o755); err != nil {
					t.Fatal(err)
				}
				writeFile(t, e.dir, "a.yaml", wl("x", "v1"))
			}, state: "x a.yaml /bin/v1"},
			{name: "removed with its parent", do: func(t *testing.T, e *env) {
				if err := os.RemoveAll(filepath.Dir(e.dir)); err != nil {
					t.Fatal(err)
				}
			}, state: ""},
			{name: "created again", do: func(t *testing.T, e *env) {
				if err := os.MkdirAll(e.dir, 0o755); err != nil {
					t.Fatal(err)
				}
				writeFile(t, e.dir, "b.yaml", wl("y", "v1"))
			}, state: "y b.yaml /bin/v1"},
		},
	},
	{
		name:  "workloads owned at start",
		owned: map[string]string{"gone": "gone.yaml", "keep": "a.yaml", "held": "bad.yaml"},
		files: map[string]string{"a.yaml": wl("keep", "v1"), "bad.yaml": "name: [\n"},
		steps: []step{
			{name: "first reconcile", do: nothing, state: "held bad.yaml /bin/adopted\nkeep a.yaml /bin/v1",
				problems: map[string]string{"bad.yaml": "bad.yaml"}},
			{name: "bad file removed", do: remove("bad.yaml"), state: "keep a.yaml /bin/v1"},
		},
	},
	{
		name: "applier failures heal",
		steps: []step{
			{name: "put fails", do: func(t *testing.T, e *env) {
				e.fake.setFailures(map[string]error{"x": errDiskFull}, nil)
				writeFile(t, e.dir, "a.yaml", wl("x", "v1"))
			}, state: "", problems: map[string]string{"a.yaml": `apply workload "x": disk full`}},
			{name: "put heals", do: heal, state: "x a.yaml /bin/v1", events: []string{"disk full", "a.yaml: ok"}},
			{name: "delete fails", do: func(t *testing.T, e *env) {
				e.fake.setFailures(nil, map[string]error{"x": errDiskFull})
				remove("a.yaml")(t, e)
			}, state: "x a.yaml /bin/v1", problems: map[string]string{"a.yaml": `delete workload "x": disk full`}},
			{name: "delete heals", do: heal, state: ""},
		},
	},
}

// heal ends the fake's failures and forces the next reconcile.
func heal(t *testing.T, e *env) {
	e.fake.setFailures(nil, nil)
	if err := e.w.Sync(e.ctx); err != nil {
		t.Fatal(err)
	}
}

// onlyOwner checks that no editor temp file ever reached the applier.
func onlyOwner(owner string) func(*testing.T, *env) {
	return func(t *testing.T, e *env) {
		t.Helper()
		calls := e.fake.callLog()
		if i := slices.IndexFunc(calls, func(c string) bool { return !strings.HasSuffix(c, " "+owner) }); i >= 0 {
			t.Errorf("applier calls %q: %q names another owner than %s", calls, calls[i], owner)
		}
	}
}
