package specload

import (
	"errors"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/flyd-dev/flyd/spec"
)

// TestReadPathsMerge: a later -f's document of a kind and name an earlier
// one holds changes the fields it sets, by compose's rules: mappings key
// by key, scalars and command replaced, env_file, profiles and uses
// appended, after by the workload it names, endpoints by name,
// containerd.volumes by target; its values take its own directory's
// variables and paths; a document only it holds is added after.
func TestReadPathsMerge(t *testing.T) {
	dir := t.TempDir()
	baseDir, overDir := filepath.Join(dir, "base"), filepath.Join(dir, "over")
	write(t, filepath.Join(baseDir, ".env"), "WHO=base\n")
	write(t, filepath.Join(overDir, ".env"), "WHO=over\nPORT=9090\n")
	write(t, filepath.Join(baseDir, "base.env"), "FROM_BASE=1\nBOTH=base-file\n")
	write(t, filepath.Join(overDir, "over.env"), "FROM_OVER=1\nBOTH=over-file\n")
	base := write(t, filepath.Join(baseDir, "stack.yaml"), `kind: network
name: backend
egress: false
---
name: db
command: [/bin/db]
endpoints: [{name: pg, port: 5432}]
---
name: api
command: [/bin/api, --who, "${WHO}", "$$HOME"]
env: {LEVEL: info, KEEP: base}
env_file: base.env
profiles: [web]
after: [db:started, cache]
uses: [db]
network: backend
endpoints:
  - name: http
    port: 8080
  - name: admin
    port: 8081
restart: {policy: always, max_restarts: 3}
containerd: {image: busybox, volumes: ["data:/data", "/srv/conf:/conf:ro"]}
kind: containerd
`)
	over := write(t, filepath.Join(overDir, "override.yaml"), `name: api
command: [/bin/api, --debug, "${WHO}"]
env: {LEVEL: debug, ADDED: "${PORT}"}
env_file: [over.env]
profiles: [debug, web]
after: [db:healthy]
endpoints: [{name: http, publish: 8080}, {name: metrics, port: "${PORT}"}]
restart: {max_restarts: 5}
containerd: {volumes: ["/srv/other:/conf"]}
---
kind: network
name: backend
egress: true
---
name: worker
command: [/bin/worker]
`)
	var warnings []string
	c := Client{Warn: func(m string) { warnings = append(warnings, m) }}
	d, err := c.ReadPaths([]string{base, over})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, w := range d.Workloads {
		names = append(names, w.Name)
	}
	if !slices.Equal(names, []string{"db", "api", "worker"}) {
		t.Fatalf("workloads %q, want db, api, worker in the order they are first defined", names)
	}
	nets := spec.DocsOf[*spec.Network](d.Docs)
	if len(nets) != 1 || nets[0].Egress == nil || !*nets[0].Egress {
		t.Errorf("network %+v: want one, egress true", nets)
	}
	api := d.Workloads[1]
	if want := []string{"/bin/api", "--debug", "over"}; !slices.Equal(api.Command, want) {
		t.Errorf("command %q, want %q (replaced, with the override's variables)", api.Command, want)
	}
	wantEnv := map[string]string{"LEVEL": "debug", "KEEP": "base", "ADDED": "9090",
		"FROM_BASE": "1", "FROM_OVER": "1", "BOTH": "over-file"}
	if !reflect.DeepEqual(api.Env, wantEnv) {
		t.Errorf("env %q, want %q", api.Env, wantEnv)
	}
	if !slices.Equal(api.Profiles, []string{"web", "debug"}) {
		t.Errorf("profiles %q", api.Profiles)
	}
	if !slices.Equal(api.After, []string{"db:healthy", "cache"}) {
		t.Errorf("after %q", api.After)
	}
	if !slices.Equal(api.Uses, []string{"db"}) {
		t.Errorf("uses %q", api.Uses)
	}
	var eps []string
	for _, e := range api.Endpoints {
		eps = append(eps, e.Name+":"+e.Port.String()+":"+e.Publish.String())
	}
	if want := []string{"http:8080:8080", "admin:8081:", "metrics:9090:"}; !slices.Equal(eps, want) {
		t.Errorf("endpoints %q, want %q", eps, want)
	}
	if api.Restart.Policy != spec.RestartAlways || api.Restart.MaxRestarts != 5 {
		t.Errorf("restart %+v", api.Restart)
	}
	if want := []string{"data:/data", "/srv/other:/conf"}; !slices.Equal(api.Containerd.Volumes, want) {
		t.Errorf("volumes %q, want %q", api.Containerd.Volumes, want)
	}
	if len(warnings) != 0 {
		t.Errorf("warnings %q", warnings)
	}
	// Its relative paths are each file's directory's; $$ is a '$' once.
	d, err = Client{}.ReadPaths([]string{
		write(t, filepath.Join(baseDir, "w.yaml"), "name: w\ncommand: [/bin/w, \"$$X\"]\nwatch: [{path: src}]\n"),
		write(t, filepath.Join(overDir, "w.yaml"), "name: w\nworkdir: run\nwatch: [{path: lib}]\n"),
	})
	if err != nil {
		t.Fatal(err)
	}
	w := d.Workloads[0]
	if w.Workdir != filepath.Join(overDir, "run") || w.Command[1] != "$X" {
		t.Errorf("workdir %q command %q", w.Workdir, w.Command)
	}
	if got := []string{w.Watch[0].Path, w.Watch[1].Path}; !slices.Equal(got, []string{filepath.Join(baseDir, "src"), filepath.Join(overDir, "lib")}) {
		t.Errorf("watch %q", got)
	}
}

// TestReadPathsTags: !reset removes a field, !override replaces one that
// would be merged, as compose's tags do; a null changes nothing.
func TestReadPathsTags(t *testing.T) {
	dir := t.TempDir()
	base := write(t, filepath.Join(dir, "a.yaml"), "name: a\ncommand: [/bin/a]\nenv: {A: '1', B: '2'}\nprofiles: [x]\nuser: nobody\nendpoints: [{name: http, port: 80}]\n")
	over := write(t, filepath.Join(dir, "b.yaml"), "name: a\nenv: !override {C: '3'}\nprofiles: !reset []\nuser: null\nendpoints: !reset\n")
	d, err := Client{}.ReadPaths([]string{base, over})
	if err != nil {
		t.Fatal(err)
	}
	w := d.Workloads[0]
	if !reflect.DeepEqual(w.Env, map[string]string{"C": "3"}) || w.Profiles != nil || w.User != "nobody" || w.Endpoints != nil {
		t.Errorf("env %q profiles %q user %q endpoints %v", w.Env, w.Profiles, w.User, w.Endpoints)
	}
}

// TestReadPathsErrors: the merged document is parsed as strictly as a
// file, and an error names the file and line of what it concerns; a name
// twice within one -f is still an error.
func TestReadPathsErrors(t *testing.T) {
	dir := t.TempDir()
	base := write(t, filepath.Join(dir, "base.yaml"), "name: a\ncommand: [/bin/a]\nenv: {A: '1'}\n---\nname: b\ncommand: [/bin/b]\n")
	setDir := filepath.Join(dir, "set")
	write(t, filepath.Join(setDir, "one.yaml"), "name: c\ncommand: [/bin/c]\n")
	write(t, filepath.Join(setDir, "two.yaml"), "name: a\nenv: {B: '2'}\n---\nname: c\ncommand: [/bin/c2]\n")
	tests := []struct {
		over  string
		want  string
		field string
	}{
		{"name: a\n\nenv: {B: '2'}\ncomand: [/bin/x]\n", "b.yaml: line 4: comand: unknown field", "comand"},
		{"name: a\nresources:\n  pids_max: many\n", "b.yaml: line 3: resources.pids_max: expected an integer, got a string", "resources.pids_max"},
		{"name: a\nenv: {A: [x]}\n", "b.yaml: line 2: env.A: expected a string, got a list", "env.A"},
		{"name: a\nenv: {B: '2', B: '3'}\n", "b.yaml: line 2: env.B: duplicate key", ""},
		{"name: a\nenv: {X: '${NOPE}'}\n", "b.yaml: line 2: env.X: variable NOPE is not set", ""},
		{"name: a\nrestart: {policy: sometimes}\n", "b.yaml: line 2: restart.policy:", "restart.policy"},
		{"name: b\nenv: {X: '1'}\n---\nname: b\nuser: x\n", `b.yaml: line 4: name: workload "b" is defined more than once`, ""},
		{"name: a\ncommand: [a\n", "b.yaml: malformed YAML", ""},
	}
	for _, tc := range tests {
		over := write(t, filepath.Join(dir, "b.yaml"), tc.over)
		_, err := Client{}.ReadPaths([]string{base, over})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.over, err, tc.want)
			continue
		}
		var fe *spec.FieldError
		if tc.field != "" && (!errors.As(err, &fe) || fe.Field != tc.field) {
			t.Errorf("%q: error %v is no field error of %s", tc.over, err, tc.field)
		}
	}
	// An error of a field the base file gives names the base file, each
	// of several errors its own.
	bad := write(t, filepath.Join(dir, "bad.yaml"), "name: a\ncommand: [/bin/a]\n\nstop: {signal: SIGFOO}\n")
	over := write(t, filepath.Join(dir, "b.yaml"), "name: a\nenv: {B: '2'}\nrestart: {policy: sometimes}\n")
	_, err := Client{}.ReadPaths([]string{bad, over})
	if err == nil || !strings.Contains(err.Error(), bad+": line 4: stop.signal:") || !strings.Contains(err.Error(), over+": line 3: restart.policy:") {
		t.Errorf("fields of both: %v", err)
	}
	// A directory's files are one set: c twice in it is refused, naming both.
	_, err = Client{}.ReadPaths([]string{base, setDir})
	if err == nil || !strings.Contains(err.Error(), `two.yaml: line 4: name: workload "c" is defined in `+filepath.Join(setDir, "one.yaml")+" too (line 1)") {
		t.Errorf("twice in a directory: %v", err)
	}
}

// TestReadPathsApart: paths that share no document are read as each is
// alone, as before: a directory's name twice is left to the batch to
// refuse.
func TestReadPathsApart(t *testing.T) {
	dir := t.TempDir()
	a := write(t, filepath.Join(dir, "a.yaml"), "name: a\ncommand: [/bin/a]\n")
	setDir := filepath.Join(dir, "set")
	write(t, filepath.Join(setDir, "one.yaml"), "name: c\ncommand: [/bin/c]\n")
	write(t, filepath.Join(setDir, "two.yaml"), "name: c\ncommand: [/bin/c2]\n")
	d, err := Client{Stdin: strings.NewReader("name: s\ncommand: [/bin/s]\n")}.ReadPaths([]string{a, setDir, "-"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, w := range d.Workloads {
		names = append(names, w.Name)
	}
	if !slices.Equal(names, []string{"a", "c", "c", "s"}) {
		t.Errorf("workloads %q", names)
	}
}

// TestReadPathsOverCompose: a flyd file read after a compose project's
// workloads changes the service of its name by the same rules, in the
// project the compose files gave it; the workloads it does not name come
// through untouched, and one it alone defines is added.
func TestReadPathsOverCompose(t *testing.T) {
	dir := t.TempDir()
	base, err := spec.ParseAll([]byte("name: web\ncommand: [/bin/web, --port, \"8080\"]\nenv: {A: '1'}\nendpoints: [{name: http, port: 8080}]\n---\nname: db\ncommand: [/bin/db]\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range base.Workloads {
		w.SetDefaults()
	}
	if err := base.SetProject("shop"); err != nil {
		t.Fatal(err)
	}
	db := base.Workloads[1]
	over := write(t, filepath.Join(dir, "flyd.yaml"), "name: web\nenv: {B: '2'}\nresources: {memory_max: 64Mi}\n---\nname: extra\ncommand: [/bin/extra]\n")
	got, err := Client{}.ReadPathsOver(base, "compose.yaml", []string{over})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Workloads) != 3 {
		t.Fatalf("%d workloads, want web, db and extra: %+v", len(got.Workloads), got.Workloads)
	}
	web := got.Workloads[0]
	if web.Name != "web" || web.Project != "shop" || !slices.Equal(web.Command, []string{"/bin/web", "--port", "8080"}) ||
		web.Env["A"] != "1" || web.Env["B"] != "2" || web.Resources == nil || web.Resources.MemoryMax == 0 || len(web.Endpoints) != 1 {
		t.Errorf("web merged: %+v", web)
	}
	if got.Workloads[1] != db {
		t.Errorf("db, which the file does not name, is not the compose project's own: %+v", got.Workloads[1])
	}
	if got.Workloads[2].Name != "extra" {
		t.Errorf("the file's own workload: %+v", got.Workloads[2])
	}
	// Without a name in common, the documents are put together as they are.
	apart := write(t, filepath.Join(dir, "apart.yaml"), "name: other\ncommand: [/bin/other]\n")
	if got, err := (Client{}).ReadPathsOver(base, "compose.yaml", []string{apart}); err != nil || len(got.Workloads) != 3 || got.Workloads[0] != base.Workloads[0] {
		t.Errorf("apart: %v, %+v", err, got)
	}
	// The merged workload is parsed as strictly as a file's.
	bad := write(t, filepath.Join(dir, "bad.yaml"), "name: web\nresources: {memory_max: lots}\n")
	if _, err := (Client{}).ReadPathsOver(base, "compose.yaml", []string{bad}); err == nil || !strings.Contains(err.Error(), "bad.yaml: line 2: resources.memory_max") {
		t.Errorf("a bad field over a compose service: %v", err)
	}
}
