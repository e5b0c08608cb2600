package integration

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/flyd-dev/flyd/api"
	"github.com/flyd-dev/flyd/spec"
)

// workloadEnv runs nothing itself: it parses what testprog env printed into
// the log of name, once it printed it all.
func workloadEnv(t *testing.T, d *daemon, name string) (ids string, env map[string]string) {
	t.Helper()
	env = map[string]string{}
	for _, line := range strings.Split(d.waitLog(t, name, "end of env\n"), "\n") {
		if rest, ok := strings.CutPrefix(line, "ids "); ok {
			ids = rest
		}
		if kv, ok := strings.CutPrefix(line, "env "); ok {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
	}
	return ids, env
}

// TestSecretsNeverLeak puts a secret in a workload and looks for it
// everywhere flyd speaks: the API, the CLI, events, its log, its errors.
func TestSecretsNeverLeak(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	secret := "s3cr3t-" + hex.EncodeToString(b)

	events := startStream(t, d.socket, "events", "--json")
	d.waitStreams(t, 1)
	var seen []string // everything flyd said
	file := d.writeSpec(t, "vault.yaml", `
name: vault
command: ["@PROG@", "env"]
env: {PLAIN: visible}
secret_env: {DB_PASSWORD: `+secret+`}
`)
	out, errOut, code := runCLI(t, d.socket, "apply", "--json", "-f", file)
	if code != 0 {
		t.Fatalf("apply: exit %d: %s", code, errOut)
	}
	seen = append(seen, out, errOut)

	// The workload gets it: what it does with it is its business.
	if _, env := workloadEnv(t, d, "vault"); env["DB_PASSWORD"] != secret || env["PLAIN"] != "visible" {
		t.Errorf("workload environment: DB_PASSWORD=%q PLAIN=%q, want the secret and visible", env["DB_PASSWORD"], env["PLAIN"])
	}
	w := d.inspect(t, "vault")
	if w.Spec == nil || w.Spec.SecretEnv["DB_PASSWORD"] != spec.RedactedValue {
		t.Errorf("inspect shows secret_env %v, want the key with %q", w.Spec.SecretEnv, spec.RedactedValue)
	}
	seen = append(seen, d.mustCLI(t, "inspect", "--json", "vault"), d.mustCLI(t, "ps", "--json"),
		d.mustCLI(t, "ps"), d.mustCLI(t, "status", "--json"))
	d.mustCLI(t, "stop", "vault")
	d.mustCLI(t, "start", "vault")
	d.mustCLI(t, "rm", "vault")
	events.waitLine(t, "the removal event", func(l string) bool { return strings.Contains(l, `"removed"`) })
	seen = append(seen, strings.Join(events.lines(), "\n"))

	// Refused specs must not quote the value in their error, whichever
	// rule it breaks.
	bad := map[string]string{
		"bad key":        "secret_env: {\"BAD KEY\": " + secret + "}",
		"starts digit":   "secret_env: {1KEY: " + secret + "}",
		"a list":         "secret_env: {KEY: [" + secret + "]}",
		"a mapping":      "secret_env: {KEY: {nested: " + secret + "}}",
		"NUL in value":   "secret_env: {KEY: \"" + secret + "\\0\"}",
		"also in env":    "env: {KEY: x}\nsecret_env: {KEY: " + secret + "}",
		"another bad":    "secret_env: {KEY: " + secret + "}\nrestart: {policy: sometimes}",
		"malformed YAML": "secret_env: {KEY: " + secret + ", [",
	}
	for what, text := range bad {
		file := d.writeSpec(t, "leak.yaml", "name: leak\ncommand: [\"@PROG@\", env]\n"+text+"\n")
		out, errOut, code := runCLI(t, d.socket, "apply", "-f", file)
		if code != 1 {
			t.Errorf("%s: apply exit %d, want 1 (stderr %q)", what, code, errOut)
		}
		seen = append(seen, out, errOut)
	}
	for what, body := range map[string]string{
		"bad key": `{"name":"leak","command":["/bin/true"],"secret_env":{"BAD KEY":"` + secret + `"}}`,
		"a list":  `{"name":"leak","command":["/bin/true"],"secret_env":{"KEY":["` + secret + `"]}}`,
		"number":  `{"name":"leak","command":["/bin/true"],"secret_env":{"KEY":` + strings.Repeat("7", 40) + secret + `}}`,
		"unknown": `{"name":"leak","command":["/bin/true"],"secret_env":{"KEY":"` + secret + `"},"sekret":"` + secret + `"}`,
	} {
		status, eb := rawPut(t, d.socket, "leak", body)
		if status != 400 || eb.Error == nil {
			t.Errorf("%s: PUT answered %d %+v, want 400", what, status, eb.Error)
			continue
		}
		seen = append(seen, eb.Error.Message, eb.Error.Field)
	}

	seen = append(seen, d.log())
	for _, text := range seen {
		if strings.Contains(text, secret) {
			t.Errorf("the secret leaked into:\n%s", text)
		}
	}
	// The desired state on disk holds it, readable by root alone.
	for _, p := range []string{d.stateDir, filepath.Join(d.stateDir, "workloads.journal")} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s: %v, mode %v; want no access for group or others", p, err, fi.Mode())
		}
	}
}

// TestEnvironment checks what a workload's environment holds and what it
// must not inherit from the daemon.
func TestEnvironment(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, withEnv("FLYD_TEST_MARKER=daemon-only", "PATH=/daemon/marker/bin:"+os.Getenv("PATH")))
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "env.yaml", `
name: show-env
command: ["@PROG@", "env"]
env: {LOG_LEVEL: debug, EMPTY: ""}
endpoints:
  - {name: http, api: http}
  - {name: admin-api, port: `+strconv.Itoa(freePort(t))+`}
---
name: own-path
command: ["@PROG@", "env"]
workdir: /usr/share
env: {PATH: "/opt/custom/bin:/usr/bin", FLYD_NETWORK: from-env}
`))
	w := d.get(t, "show-env")
	ports := map[string]int{}
	for _, p := range w.Ports {
		ports[p.Endpoint] = p.Port
	}
	_, env := workloadEnv(t, d, "show-env")
	want := map[string]string{
		"FLYD_WORKLOAD":            "show-env",
		"FLYD_NETWORK":             "host",
		"FLYD_PORT_HTTP":           strconv.Itoa(ports["http"]),
		"FLYD_PORT_ADMIN_API":      strconv.Itoa(ports["admin-api"]),
		"CODEFLY__RUNTIME_CONTEXT": "native",
		"LOG_LEVEL":                "debug",
		"EMPTY":                    "",
	}
	for k, v := range want {
		if got, ok := env[k]; !ok || got != v {
			t.Errorf("%s=%q (set: %v), want %q", k, got, ok, v)
		}
	}
	if ports["http"] == 0 || ports["admin-api"] == 0 {
		t.Errorf("ports %v: want both endpoints allocated", ports)
	}
	if p := env["PATH"]; p == "" || strings.Contains(p, "/daemon/marker") || !strings.Contains(p, "/usr/bin") {
		t.Errorf("PATH=%q, want the default, not the daemon's", p)
	}
	for k := range env {
		if k == "FLYD_TEST_MARKER" || k == "HOME" || k == "GOPATH" || k == "GOFLAGS" {
			t.Errorf("%s leaked from the daemon's environment", k)
		}
	}
	// env comes after flyd's own variables: the spec has the last word.
	_, env = workloadEnv(t, d, "own-path")
	if env["PATH"] != "/opt/custom/bin:/usr/bin" || env["FLYD_NETWORK"] != "from-env" {
		t.Errorf("own-path: PATH=%q FLYD_NETWORK=%q, want the spec's", env["PATH"], env["FLYD_NETWORK"])
	}
	if cwd := d.waitLog(t, "own-path", "cwd /usr/share\n"); cwd == "" {
		t.Error("own-path did not run in its workdir")
	}
	d.writeSpec(t, "env.yaml", "name: no-dir\ncommand: [\"@PROG@\", env]\nworkdir: /nonexistent/dir\n")
	_, errOut, code := runCLI(t, d.socket, "apply", "-f", filepath.Join(d.dir, "env.yaml"))
	if w := d.get(t, "no-dir"); code != 1 || w.State != api.StateFailed || !strings.Contains(w.LastError, "/nonexistent/dir") {
		t.Errorf("missing workdir: exit %d (%s), state %s, last_error %q; want failed naming the dir", code, errOut, w.State, w.LastError)
	}
}

// TestUser runs a workload as nobody: its ids, its groups (none of root's)
// and its HOME.
func TestUser(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "user.yaml", `
name: as-nobody
command: ["@PROG@", "env"]
user: nobody
`))
	ids, env := workloadEnv(t, d, "as-nobody")
	if !strings.HasPrefix(ids, "uid=65534 gid=65534 groups=") {
		t.Errorf("ids %q, want uid=65534 gid=65534", ids)
	}
	for _, g := range strings.Split(strings.TrimPrefix(ids, "uid=65534 gid=65534 groups="), ",") {
		if g != "" && g != "65534" {
			t.Errorf("supplementary group %s: nobody belongs to no group but nogroup (ids %q)", g, ids)
		}
	}
	if env["HOME"] != "/nonexistent" || env["USER"] != "nobody" {
		t.Errorf("HOME=%q USER=%q, want nobody's", env["HOME"], env["USER"])
	}
	if w := d.get(t, "as-nobody"); w.State != api.StateRunning {
		t.Errorf("state %s, want running", w.State)
	}
	// A user that does not exist is refused at start, not retried.
	d.writeSpec(t, "user.yaml", "name: as-ghost\ncommand: [\"@PROG@\", env]\nuser: no-such-user-xyz\n")
	_, errOut, code := runCLI(t, d.socket, "apply", "-f", filepath.Join(d.dir, "user.yaml"))
	if w := d.get(t, "as-ghost"); code != 1 || w.State != api.StateFailed || !strings.Contains(w.LastError, "no-such-user-xyz") {
		t.Errorf("unknown user: exit %d (%s), state %s, last_error %q; want failed naming the user", code, errOut, w.State, w.LastError)
	}
}
