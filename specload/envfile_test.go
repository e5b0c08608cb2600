package specload

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func write(t *testing.T, path, content string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestParseEnv(t *testing.T) {
	got, err := ParseEnv("a.env", []byte("# comment\nA=1\nexport B=two words # note\nC='${A} kept'\nD=\"${A}\\nx\"\nE=\n\nF=x#y\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"A": "1", "B": "two words", "C": "${A} kept", "D": "1\nx", "E": "", "F": "x#y"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestParseEnvErrors(t *testing.T) {
	tests := []struct{ in, want string }{
		{"A=1\nB=\"hunter2\nC=3\n", "a.env: line 2: not KEY=VALUE, or a quote not closed"},
		{"hunter2\nA=1\n", "a.env: line 1: not KEY=VALUE"},
		{"A=1\nB=2\nhunter2 x=3\n", "a.env: line 3: a variable name must be letters, digits and '_'"},
		{"A=\"multi\nline\"\nB=ok\nC D=hunter2\n", "a.env: line 4: a variable name must be"},
		{"my.key=hunter2\n", "a.env: line 1: a variable name must be letters, digits and '_'"},
		{"A=1\nhunter2", "a.env: line 2: a variable name must be"},
	}
	for _, tc := range tests {
		_, err := ParseEnv("a.env", []byte(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseEnv(%q): %v, want %q", tc.in, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("ParseEnv(%q): error %q shows a value", tc.in, err)
		}
	}
	if _, err := ParseEnv("big.env", make([]byte, MaxEnvFile+1)); err == nil || !strings.Contains(err.Error(), "big.env: over") {
		t.Errorf("big file: %v", err)
	}
}

// TestClientVarsPrecedence: the process environment over --env-file (a
// later file over an earlier one); .env only when no --env-file is given,
// as compose reads them.
func TestClientVarsPrecedence(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, ".env"), "A=dotenv\nB=dotenv\nC=dotenv\nD=dotenv\n")
	one := write(t, filepath.Join(dir, "one.env"), "B=one\nC=one\n")
	two := write(t, filepath.Join(dir, "two.env"), "C=two\n")
	environ := []string{"A=environ", "EMPTY="}
	check := func(vars Lookup, want map[string]string) {
		t.Helper()
		for name, v := range want {
			got, ok := vars(name)
			if v == "<unset>" {
				if ok {
					t.Errorf("%s = %q, want unset", name, got)
				}
				continue
			}
			if !ok || got != v {
				t.Errorf("%s = %q (set %v), want %q", name, got, ok, v)
			}
		}
	}
	vars, err := ClientVars(environ, nil, dir)
	if err != nil {
		t.Fatal(err)
	}
	check(vars, map[string]string{"A": "environ", "B": "dotenv", "C": "dotenv", "D": "dotenv", "EMPTY": ""})
	vars, err = ClientVars(environ, []string{one, two}, dir)
	if err != nil {
		t.Fatal(err)
	}
	check(vars, map[string]string{"A": "environ", "B": "one", "C": "two", "D": "<unset>"})
	// No .env is no variable; a missing --env-file is an error naming it.
	vars, err = ClientVars(nil, nil, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	check(vars, map[string]string{"A": "<unset>"})
	if _, err := ClientVars(nil, []string{filepath.Join(dir, "nope.env")}, dir); err == nil || !strings.Contains(err.Error(), "--env-file: open "+filepath.Join(dir, "nope.env")) {
		t.Errorf("missing --env-file: %v", err)
	}
	write(t, filepath.Join(dir, "bad", ".env"), "X='open\n")
	if _, err := ClientVars(nil, nil, filepath.Join(dir, "bad")); err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "bad", ".env")+": line 1") {
		t.Errorf("bad .env: %v", err)
	}
}
