package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flyd-dev/flyd/cmd/internal/cli"
	"github.com/flyd-dev/flyd/spec"
)

func TestExitCodes(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "none.sock")
	tests := []struct {
		args   []string
		code   int
		stderr string
	}{
		{nil, 2, "usage"},
		{[]string{"bogus"}, 2, `unknown command "bogus"`},
		{[]string{"logs", "--socket", sock}, 2, "a workload name, --all or -p PROJECT"},
		{[]string{"stop", "--socket", sock}, 2, "--all"},
		{[]string{"apply", "--socket", sock}, 2, "-f is required"},
		{[]string{"ps", "--nope"}, 2, "flag provided but not defined"},
		{[]string{"ps", "--socket", sock}, 1, "no flyd daemon answers on " + sock},
		// The shared flags stand before the command too.
		{[]string{"--socket", sock, "ps"}, 1, "no flyd daemon answers on " + sock},
		{[]string{"--socket=" + sock, "--json", "ps"}, 1, "no flyd daemon answers on " + sock},
		{[]string{"-json", "--socket", sock, "logs"}, 2, "a workload name, --all or -p PROJECT"},
		{[]string{"--socket"}, 2, "--socket needs a path"},
		{[]string{"--all", "ps"}, 2, "--all is not a flag of every command"},
		{[]string{"version"}, 0, ""},
		{[]string{"help"}, 0, "commands:"},
	}
	for _, tt := range tests {
		var out, errb bytes.Buffer
		code := cli.Main(tt.args, &out, &errb)
		if code != tt.code || !strings.Contains(errb.String(), tt.stderr) {
			t.Errorf("flyd %q: exit %d, stderr %q; want %d and %q", tt.args, code, errb.String(), tt.code, tt.stderr)
		}
	}
}

func TestLeadingJSON(t *testing.T) {
	for _, args := range [][]string{{"--json", "version"}, {"-json", "version", "--json=true"}} {
		var out, errb bytes.Buffer
		if code := cli.Main(args, &out, &errb); code != 0 || out.String() != "{\"version\":\""+cli.Version+"\"}\n" {
			t.Errorf("flyd %q: exit %d, %q %q; want the version as JSON", args, code, out.String(), errb.String())
		}
	}
	var out, errb bytes.Buffer
	if code := cli.Main([]string{"--json", "version", "--json=false"}, &out, &errb); code != 0 || out.String() != "flyd "+cli.Version+"\n" {
		t.Errorf("the command's own --json=false did not win: exit %d, %q", code, out.String())
	}
}

func TestPortHashOffline(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"port", "hash", "--workspace", "demo", "--module", "store", "--service", "postgres", "--endpoint", "tcp"}, "56960\n"},
		{[]string{"port", "hash", "--workspace", "demo", "--module", "api", "--service", "server", "--endpoint", "grpc", "--api", "grpc"}, "54953\n"},
		{[]string{"port", "hash", "--workspace", "acme", "--module", "web", "--service", "frontend", "--endpoint", "rest", "--api", "rest"}, "2032\n"},
		{[]string{"port", "hash", "--workspace", "demo", "--module", "store", "--service", "postgres", "--endpoint", "tcp", "--mode", "host"}, "56960\n"},
		{[]string{"port", "hash", "--workspace", "demo", "--module", "store", "--service", "postgres", "--endpoint", "tcp", "--mode", "container"}, "47570\n"},
	} {
		var out, errb bytes.Buffer
		// No daemon is reachable on this socket: the command must not need one.
		args := append(tt.args, "--socket", filepath.Join(t.TempDir(), "none.sock"))
		if code := cli.Main(args, &out, &errb); code != 0 || out.String() != tt.want {
			t.Errorf("flyd %q: exit %d, %q %q; want %q", tt.args, code, out.String(), errb.String(), tt.want)
		}
	}
}

// TestApplyReadsFilesFirst: apply reads and selects every file before it
// asks the daemon anything, so bad input is refused without one.
func TestApplyReadsFilesFirst(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "none.sock")
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	only := write("only.yaml", "name: tools\ncommand: [/bin/true]\nprofiles: [debug, ops]\n")
	needs := write("needs.yaml", "- {name: app, command: [/bin/true], after: [seed]}\n- {name: seed, command: [/bin/true], profiles: [ci]}\n")
	required := write("required.yaml", "name: app\ncommand: [/bin/true, \"${FLYD_TEST_UNSET_VAR:?say which}\"]\n")
	tests := []struct {
		args           []string
		code           int
		stdout, stderr string
	}{
		{[]string{"apply", "-f", only}, 0, "tools left out: profiles debug, ops not asked for\n", ""},
		{[]string{"apply", "--json", "-f", only}, 0, "", "tools left out: profiles debug, ops not asked for\n"},
		{[]string{"apply", "-f", only, "--profile", "nope"}, 0, "tools left out", "warning: profile nope: no workload has it"},
		{[]string{"apply", "-f", only, "--profile", "No_pe"}, 2, "", `profile "No_pe": a profile's name must be`},
		{[]string{"apply", "-f", needs}, 1, "", "workload app needs seed (after or uses), which is left out: none of its profiles (ci) is asked for"},
		{[]string{"apply", "-f", required}, 1, "", required + ": line 2: command[1]: required variable FLYD_TEST_UNSET_VAR is not set: say which"},
		{[]string{"apply", "-f", only, "--env-file", filepath.Join(dir, "nope.env")}, 1, "", "--env-file: open " + filepath.Join(dir, "nope.env")},
	}
	for _, tt := range tests {
		var out, errb bytes.Buffer
		code := cli.Main(append(tt.args, "--socket", sock), &out, &errb)
		if code != tt.code || !strings.Contains(out.String(), tt.stdout) || !strings.Contains(errb.String(), tt.stderr) {
			t.Errorf("flyd %q: exit %d, stdout %q, stderr %q; want %d, %q, %q", tt.args, code, out.String(), errb.String(), tt.code, tt.stdout, tt.stderr)
		}
	}
	// FLYD_PROFILES asks as --profile does: tools is in, so the daemon
	// is asked, and is not there.
	t.Setenv("FLYD_PROFILES", "ops")
	var out, errb bytes.Buffer
	if code := cli.Main([]string{"apply", "-f", only, "--socket", sock}, &out, &errb); code != 1 || strings.Contains(out.String(), "left out") ||
		!strings.Contains(errb.String(), "no flyd daemon answers") {
		t.Errorf("FLYD_PROFILES=ops: exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}
}

// TestEveryDocumentKindHasItsCommand: `flyd PLURAL` exists for every kind
// of the table, with its view's summary or the generic one.
func TestEveryDocumentKindHasItsCommand(t *testing.T) {
	var out, errb bytes.Buffer
	if code := cli.Main([]string{"help"}, &out, &errb); code != 0 {
		t.Fatalf("help: exit %d, %s", code, errb.String())
	}
	help := out.String() + errb.String()
	for _, k := range spec.DocKinds() {
		if !strings.Contains(help, k.Plural) {
			t.Errorf("help has no %q command:\n%s", k.Plural, help)
		}
	}
	if !strings.Contains(help, "list isolated networks, or delete one") {
		t.Errorf("the networks' own summary is lost:\n%s", help)
	}
}
