package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flyd-dev/flyd/api"
)

// TestApplyVariablesAndProfiles applies a directory as a compose user
// would: its values take the CLI's environment over the .env beside the
// files, a workload's env_file goes under its env, and a workload of a
// profile runs only when the profile is asked for. The running processes
// show what they were given.
func TestApplyVariablesAndProfiles(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	dir := filepath.Join(d.dir, "stack")
	for name, text := range map[string]string{
		".env":         "APP_NAME=echo-env\nGREETING=from-dotenv\nOVERRIDE=from-dotenv\n",
		"conf/app.env": "FROM_ENV_FILE=yes\nPLAIN=from-env-file\nLITERAL='${GREETING}'\n",
		"app.yaml": `name: ${APP_NAME}
command: ["@PROG@", "env"]
env:
  GREETING: ${GREETING}
  OVERRIDE: ${OVERRIDE}
  DEFAULTED: ${FLYD_TEST_MISSING:-fallback}
  QUOTED: ${QUOTED}
  UNSET: "[${FLYD_TEST_UNSET}]"
  PLAIN: from-env
  DOLLAR: "$$HOME"
env_file: conf/app.env
`,
		"tools.json": `{"name": "tools", "command": ["@PROG@", "env"], "profiles": ["debug"], "env": {"WHO": "${WHO:-tools}"}}`,
		"extra.yaml": "name: extra\ncommand: [\"@PROG@\", \"env\"]\nprofiles: [never]\n",
	} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(strings.ReplaceAll(text, "@PROG@", d.prog)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*waitFor)
	defer cancel()
	cmd := cliCmd(ctx, d.socket, "apply", "-f", dir, "--profile", "debug")
	quoted := `a "quoted" value: # with a colon, '$$' and ${NOT_A_VAR}`
	cmd.Env = append(cmd.Env, "OVERRIDE=from-environ", "QUOTED="+quoted)
	out, errOut, code := runCmd(t, cmd)
	if code != 0 {
		t.Fatalf("apply: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	if !strings.Contains(out, "extra left out: profiles never not asked for") {
		t.Errorf("apply's output %q does not say extra is left out", out)
	}
	if want := filepath.Join(dir, "app.yaml") + ": line 8: env.UNSET: variable FLYD_TEST_UNSET is not set: using an empty string"; !strings.Contains(errOut, want) {
		t.Errorf("apply's stderr %q, want the warning %q", errOut, want)
	}

	_, env := workloadEnv(t, d, "echo-env")
	for k, want := range map[string]string{
		"GREETING":      "from-dotenv",
		"OVERRIDE":      "from-environ", // the environment over .env
		"DEFAULTED":     "fallback",
		"QUOTED":        quoted, // a value of the environment is never read as YAML
		"UNSET":         "[]",
		"PLAIN":         "from-env", // env over env_file
		"FROM_ENV_FILE": "yes",
		"LITERAL":       "${GREETING}", // env_file values are not interpolated again
		"DOLLAR":        "$HOME",
	} {
		if env[k] != want {
			t.Errorf("echo-env: %s=%q, want %q", k, env[k], want)
		}
	}
	if _, env := workloadEnv(t, d, "tools"); env["WHO"] != "tools" {
		t.Errorf("tools: WHO=%q, want tools", env["WHO"])
	}
	if ps := d.mustCLI(t, "ps"); strings.Contains(ps, "extra") {
		t.Errorf("extra runs:\n%s", ps)
	}

	// Without the profile, tools is left out and said so; a workload that
	// needs one left out is refused, naming both, and nothing is applied.
	if err := os.WriteFile(filepath.Join(dir, "needs.yaml"), []byte("name: needs\ncommand: [\""+d.prog+"\", env]\nafter: [\"tools:started\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, errOut, code = runCLI(t, d.socket, "apply", "-f", dir)
	if code != 1 || !strings.Contains(errOut, "workload needs needs tools (after or uses), which is left out: none of its profiles (debug) is asked for") {
		t.Errorf("apply without the profile: exit %d, stderr %q", code, errOut)
	}
	if _, _, code := runCLI(t, d.socket, "inspect", "needs"); code == 0 {
		t.Error("needs was applied")
	}
}

// TestWorkloadsDirectoryVariables: the daemon gives the files of its
// workloads directory the variables of the .env there, never its own
// environment; env_file names a NAME.env beside; a workload with profiles
// is left out; a variable with neither value nor default is a file problem.
func TestWorkloadsDirectoryVariables(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, withEnv("FLYD_TEST_DAEMON_VAR=from-the-daemon"))
	dir := filepath.Join(d.dir, "workloads.d")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct{ name, text string }{
		{".env", "GREETING=from-dotenv\n"},
		{"app.env", "FROM_ENV_FILE=yes\n"},
		{"off.yaml", "name: off\ncommand: [\"@PROG@\", \"env\"]\nprofiles: [debug]\n"},
		{"app.yaml", "name: dir-env\ncommand: [\"@PROG@\", \"env\"]\nenv_file: app.env\n" +
			"env: {GREETING: \"${GREETING}\", DAEMON: \"${FLYD_TEST_DAEMON_VAR:-not-the-daemons}\"}\n"},
	} {
		if err := os.WriteFile(filepath.Join(dir, f.name), []byte(strings.ReplaceAll(f.text, "@PROG@", d.prog)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	d.waitState(t, "dir-env", api.StateRunning)
	_, env := workloadEnv(t, d, "dir-env")
	if env["GREETING"] != "from-dotenv" || env["DAEMON"] != "not-the-daemons" || env["FROM_ENV_FILE"] != "yes" {
		t.Errorf("env GREETING=%q DAEMON=%q FROM_ENV_FILE=%q", env["GREETING"], env["DAEMON"], env["FROM_ENV_FILE"])
	}
	if _, _, code := runCLI(t, d.socket, "inspect", "off"); code == 0 {
		t.Error("off, of a profile, was applied")
	}
	if err := os.WriteFile(filepath.Join(dir, "unset.yaml"), []byte("name: unset\ncommand: [/bin/true, \"${FLYD_TEST_DAEMON_VAR}\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the unset variable reported", func() error {
		st, err := d.client.Status(t.Context())
		if err != nil {
			return err
		}
		if len(st.FileProblems) != 1 || !strings.Contains(st.FileProblems[0].Error, "command[1]: variable FLYD_TEST_DAEMON_VAR is not set") {
			return fmt.Errorf("file problems %+v", st.FileProblems)
		}
		return nil
	})
}
