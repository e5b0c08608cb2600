package specload

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/flyd-dev/flyd/spec"
)

// TestReadPathDirectory reads a directory as flyd apply does: its .env
// gives the values their variables under the environment, env_file is
// relative to it and goes under env.
func TestReadPathDirectory(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, ".env"), "GREETING=hello\nPORT=8081\nTAG=from-dotenv\n")
	write(t, filepath.Join(dir, "conf", "app.env"), "FROM_FILE=one\nSHARED=file\nWITH_DOLLAR='${NOT_AGAIN}'\n")
	write(t, filepath.Join(dir, "conf", "later.env"), "FROM_FILE=two\nPW=file\n")
	write(t, filepath.Join(dir, "app.yaml"), `name: app
command: [/bin/app, "${GREETING}", "$$HOME", "${PORT_HTTP}", "${endpoint:web/api/http}"]
env:
  SHARED: env
  TAG: "${TAG}"
  QUOTE: "${QUOTE}"
secret_env: {PW: "${PW:-dflt}"}
env_file: [conf/app.env, conf/later.env]
endpoints: [{name: http, port: "${PORT}"}]
`)
	write(t, filepath.Join(dir, "net.json"), `{"kind": "network", "name": "${NET:-backend}"}`)
	write(t, filepath.Join(dir, ".hidden.yaml"), "not: read\n")
	write(t, filepath.Join(dir, "notes.txt"), "not read either\n")
	var warnings []string
	c := Client{Environ: []string{"TAG=from-environ", `QUOTE=a"b` + "\nc: d"}, Warn: func(m string) { warnings = append(warnings, m) }}
	d, err := c.ReadPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Workloads) != 1 || len(spec.DocsOf[*spec.Network](d.Docs)) != 1 || spec.DocsOf[*spec.Network](d.Docs)[0].Name != "backend" {
		t.Fatalf("documents %+v", d)
	}
	w := d.Workloads[0]
	if want := []string{"/bin/app", "hello", "$HOME", "${PORT_HTTP}", "${endpoint:web/api/http}"}; !reflect.DeepEqual(w.Command, want) {
		t.Errorf("command %q, want %q", w.Command, want)
	}
	want := map[string]string{"SHARED": "env", "TAG": "from-environ", "QUOTE": "a\"b\nc: d",
		"FROM_FILE": "two", "WITH_DOLLAR": "${NOT_AGAIN}"}
	if !reflect.DeepEqual(w.Env, want) {
		t.Errorf("env %q, want %q", w.Env, want)
	}
	// secret_env wins over env_file too; env_file is done with.
	if w.SecretEnv["PW"] != "dflt" || w.EnvFile != nil {
		t.Errorf("secret_env %q env_file %q", w.SecretEnv, w.EnvFile)
	}
	if w.Endpoints[0].Port != spec.FixedPort(8081) {
		t.Errorf("port %v", w.Endpoints[0].Port)
	}
	if len(warnings) != 0 {
		t.Errorf("warnings %q", warnings)
	}
}

func TestReadPathFileAndStdin(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, ".env"), "WHO=dotenv\n")
	f := write(t, filepath.Join(dir, "one.yaml"), "name: one\ncommand: [/bin/a, \"${WHO}\", \"${NOBODY}\"]\n")
	var warnings []string
	c := Client{Warn: func(m string) { warnings = append(warnings, m) }}
	d, err := c.ReadPath(f)
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Workloads[0].Command; got[1] != "dotenv" || got[2] != "" {
		t.Errorf("command %q", got)
	}
	if want := []string{f + ": line 2: command[2]: variable NOBODY is not set: using an empty string"}; !reflect.DeepEqual(warnings, want) {
		t.Errorf("warnings %q, want %q", warnings, want)
	}
	// --env-file replaces the .env beside the files.
	other := write(t, filepath.Join(t.TempDir(), "other.env"), "NOBODY=other\n")
	c.EnvFiles = []string{other}
	warnings = nil
	d, err = c.ReadPath(f)
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Workloads[0].Command; got[1] != "" || got[2] != "other" || len(warnings) != 1 {
		t.Errorf("command %q, warnings %q", got, warnings)
	}
	// stdin: the current directory's .env and env_file.
	t.Chdir(dir)
	write(t, filepath.Join(dir, "s.env"), "S=1\n")
	c = Client{Stdin: strings.NewReader("name: s\ncommand: [/bin/a, \"${WHO}\"]\nenv_file: s.env\n")}
	d, err = c.ReadPath("-")
	if err != nil {
		t.Fatal(err)
	}
	if w := d.Workloads[0]; w.Command[1] != "dotenv" || w.Env["S"] != "1" {
		t.Errorf("stdin: %q %q", w.Command, w.Env)
	}
}

func TestReadPathErrors(t *testing.T) {
	dir := t.TempDir()
	tests := []struct{ file, env, want string }{
		{"name: a\ncommand: [/bin/a]\nsecret_env: {PW: \"${PW:?put PW in .env}\"}\n", "",
			"a.yaml: line 3: secret_env.PW: required variable PW is not set: put PW in .env"},
		{"name: a\ncommand: [/bin/a]\nenv: {X: \"${X:?}\"}\n", "X=\n", "a.yaml: line 3: env.X: required variable X is empty"},
		{"name: a\ncommand: [/bin/a]\nenv_file: missing.env\n", "", "a.yaml: workload a: env_file: open " + filepath.Join(dir, "missing.env")},
		{"name: a\ncommand: [/bin/a]\nenv_file: bad.env\n", "", "a.yaml: workload a: env_file: " + filepath.Join(dir, "bad.env") + ": line 2: not KEY=VALUE"},
		{"name: a\ncommand: [/bin/a]\nenv_file: nul.env\n", "", "a.yaml: workload a: with its env_file: env.X: value must not contain a NUL byte"},
		{"name: a\ncommand: [/bin/a]\nresources: {pids_max: \"${N}\"}\n", "N=many\n", "a.yaml: line 3: resources.pids_max: expected an integer, got a string"},
		{"name: a\ncommand: [\"${A B}\"]\n", "", "a.yaml: line 2: command[0]: ${A…}: after a variable's name comes }"},
	}
	write(t, filepath.Join(dir, "bad.env"), "OK=1\nX=\"sup3rs3cret\n")
	if err := os.WriteFile(filepath.Join(dir, "nul.env"), []byte("X=a\x00b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range tests {
		f := write(t, filepath.Join(dir, "a.yaml"), tc.file)
		write(t, filepath.Join(dir, ".env"), tc.env)
		_, err := Client{}.ReadPath(f)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.file, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "sup3rs3cret") {
			t.Errorf("error %q shows a value", err)
		}
	}
}

// TestParseStrict: where no one reads a warning (the workloads directory),
// an unset variable is an error, and env_file needs a reader.
func TestParseStrict(t *testing.T) {
	_, err := Parse("w.yaml", []byte("name: a\ncommand: [/bin/a, \"${X}\", \"${Y:-y}\"]\n"), Options{})
	if err == nil || !strings.Contains(err.Error(), "w.yaml: line 2: command[1]: variable X is not set (give it a default") {
		t.Errorf("unset: %v", err)
	}
	d, err := Parse("w.yaml", []byte("name: a\ncommand: [/bin/a, \"${Y:-y}\", \"${V}\"]\n"), Options{Vars: Layered(map[string]string{"V": "v"})})
	if err != nil || d.Workloads[0].Command[1] != "y" || d.Workloads[0].Command[2] != "v" {
		t.Errorf("defaults: %v %v", d, err)
	}
	_, err = Parse("w.yaml", []byte("name: a\ncommand: [/bin/a]\nenv_file: x.env\n"), Options{})
	if err == nil || !strings.Contains(err.Error(), "w.yaml: workload a: env_file: not read here") {
		t.Errorf("env_file: %v", err)
	}
	boom := errors.New("refused")
	_, err = Parse("w.yaml", []byte("name: a\ncommand: [/bin/a]\nenv_file: x.env\n"), Options{ReadEnvFile: func(string) (map[string]string, error) { return nil, boom }})
	if !errors.Is(err, boom) {
		t.Errorf("reader's error: %v", err)
	}
}

// TestReadPathResolvesWatch: a relative watch path is the spec file's
// directory's, as env_file is; an absolute one stays; stdin's are the
// current directory's.
func TestReadPathResolvesWatch(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "web.yaml")
	doc := "name: web\ncommand: [x]\nwatch: [{path: src}, {path: ../lib/x.py}, {path: /srv/abs}]\n"
	if err := os.WriteFile(f, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := Client{}.ReadPath(f)
	if err != nil {
		t.Fatal(err)
	}
	got := []string{d.Workloads[0].Watch[0].Path, d.Workloads[0].Watch[1].Path, d.Workloads[0].Watch[2].Path}
	want := []string{filepath.Join(dir, "src"), filepath.Join(filepath.Dir(dir), "lib/x.py"), "/srv/abs"}
	if !slices.Equal(got, want) {
		t.Errorf("paths %q, want %q", got, want)
	}
	d, err = Client{Stdin: strings.NewReader(doc)}.ReadPath("-")
	if err != nil {
		t.Fatal(err)
	}
	if wd, _ := os.Getwd(); d.Workloads[0].Watch[0].Path != filepath.Join(wd, "src") {
		t.Errorf("stdin's path %q, want the current directory's", d.Workloads[0].Watch[0].Path)
	}
}
