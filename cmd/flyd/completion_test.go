package main

import (
	"bytes"
	"context"
	"net"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flyd-dev/flyd/cmd/internal/cli"
)

// asked records what a completion asked the daemon for, and answers with
// names of its own.
type asked struct{ kind, project string }

func completeAsking(args ...string) ([]string, []asked) {
	var a []asked
	out := complete(context.Background(), args, func(_ context.Context, _, project, kind string) []string {
		a = append(a, asked{kind, project})
		return []string{"alpha", "beta"}
	})
	return out, a
}

func TestCompleteCommands(t *testing.T) {
	all, _ := completeAsking("")
	for _, want := range []string{"apply", "stop", "logs", "networks", "completion", "daemon"} {
		if !slices.Contains(all, want) {
			t.Errorf("commands %q lack %s", all, want)
		}
	}
	if slices.Contains(all, "__complete") {
		t.Errorf("the hidden __complete is offered: %q", all)
	}
	if got, _ := completeAsking("st"); !slices.Equal(got, []string{"start", "status", "stop"}) {
		t.Errorf("st: %q", got)
	}
	// After the shared flags, still a command.
	if got, _ := completeAsking("--json", "-p", "ci", "ver"); !slices.Equal(got, []string{"version"}) {
		t.Errorf("--json -p ci ver: %q", got)
	}
	if got, _ := completeAsking("-"); !slices.Equal(got, []string{"--json", "--project", "--socket", "-p"}) {
		t.Errorf("-: %q", got)
	}
}

// Every command's flags are offered, and each one offered is one that
// the command's -h lists: both are its own flag set.
func TestCompleteFlags(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want []string
	}{
		{[]string{"stop", "-"}, []string{"--all", "--all-projects", "--force", "--parallel", "--socket", "--json", "-p"}},
		{[]string{"logs", "--t"}, []string{"--tail", "--timestamps"}},
		{[]string{"apply", "--"}, []string{"--env-file", "--profile", "--wait", "--start"}},
		{[]string{"up", "web", "--w"}, []string{"--wait", "--watch"}},
		{[]string{"exec", "--n"}, []string{"--network"}},
	} {
		got, _ := completeAsking(tt.args...)
		for _, w := range tt.want {
			if !slices.Contains(got, w) {
				t.Errorf("%q: %q lacks %s", tt.args, got, w)
			}
		}
	}
	for cmd := range cli.Commands() {
		if mayExecDaemon([]string{cmd}) || cmd == "completion" {
			continue
		}
		flags, _ := completeAsking(cmd, "-")
		if len(flags) == 0 {
			t.Errorf("%s: no flag offered", cmd)
			continue
		}
		var out, errb bytes.Buffer
		if code := cli.Main([]string{cmd, "-h"}, &out, &errb); code != 0 {
			t.Fatalf("flyd %s -h: exit %d: %s", cmd, code, errb.String())
		}
		for _, f := range flags {
			if !regexp.MustCompile(`(?m)^  -` + regexp.QuoteMeta(strings.TrimLeft(f, "-")) + `\s`).MatchString(errb.String()) {
				t.Errorf("%s: %s is offered, and not in its -h:\n%s", cmd, f, errb.String())
			}
		}
	}
}

func TestCompleteArguments(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want []string
		ask  []asked
	}{
		{[]string{"stop", ""}, []string{"alpha", "beta"}, []asked{{"workload", ""}}},
		{[]string{"stop", "-p", "ci", "a"}, []string{"alpha"}, []asked{{"workload", "ci"}}},
		{[]string{"-p", "ci", "logs", "-f", ""}, []string{"alpha", "beta"}, []asked{{"workload", "ci"}}},
		{[]string{"logs", "--project=ci", "--tail", "5", "b"}, []string{"beta"}, []asked{{"workload", "ci"}}},
		{[]string{"-p", ""}, []string{"alpha", "beta"}, []asked{{"project", ""}}},
		{[]string{"down", "-p", "al"}, []string{"alpha"}, []asked{{"project", ""}}},
		{[]string{"exec", "--network", ""}, []string{"alpha", "beta"}, []asked{{"network", ""}}},
		{[]string{"networks", ""}, []string{"rm"}, nil},
		{[]string{"policies", "rm", ""}, []string{"alpha", "beta"}, []asked{{"policy", ""}}},
		{[]string{"apply", "-f", ""}, []string{completeFiles}, nil},
		{[]string{"up", "--env-file", ""}, []string{completeFiles}, nil},
		{[]string{"--socket", ""}, []string{completeFiles}, nil},
		{[]string{"logs", "--tail", ""}, nil, nil},
		{[]string{"exec", "--network", "n", "sh", ""}, []string{completeDefault}, nil},
		{[]string{"run", "-f", "stack", "--", ""}, []string{completeDefault}, nil},
		{[]string{"stop", "--", ""}, []string{"alpha", "beta"}, []asked{{"workload", ""}}},
		{[]string{"ps", ""}, nil, nil},
		{[]string{"port", ""}, []string{"hash"}, nil},
		{[]string{"registry", ""}, []string{"drift", "ls", "serve"}, nil},
		{[]string{"daemon", "-"}, nil, nil},
		{[]string{"completion", ""}, []string{"bash", "fish", "zsh"}, nil},
		{[]string{"bogus", ""}, nil, nil},
	} {
		got, a := completeAsking(tt.args...)
		if !slices.Equal(got, tt.want) || !slices.Equal(a, tt.ask) {
			t.Errorf("%q: offered %q asking %v; want %q asking %v", tt.args, got, a, tt.want, tt.ask)
		}
	}
}

// With no daemon, or one that never answers, a completion offers no
// names, says nothing and returns at its timeout.
func TestCompleteWithoutDaemon(t *testing.T) {
	dir := t.TempDir()
	silent := filepath.Join(dir, "silent.sock")
	l, err := net.Listen("unix", silent)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close() // held open, never answered
		}
	}()
	for _, sock := range []string{filepath.Join(dir, "none.sock"), silent} {
		for _, args := range [][]string{{"stop", ""}, {"-p", ""}, {"exec", "--network", ""}, {"networks", "rm", ""}} {
			var out, errb bytes.Buffer
			start := time.Now()
			code := cli.Main(append([]string{"__complete", "--socket", sock}, args...), &out, &errb)
			took := time.Since(start)
			if code != 0 || out.Len() != 0 || errb.Len() != 0 {
				t.Errorf("%s %q: exit %d, %q %q; want nothing", sock, args, code, out.String(), errb.String())
			}
			if took > 2*completeTimeout {
				t.Errorf("%s %q: took %v", sock, args, took)
			}
		}
	}
}

func TestCompletionScripts(t *testing.T) {
	for _, sh := range []string{"bash", "zsh", "fish"} {
		var out, errb bytes.Buffer
		if code := cli.Main([]string{"completion", sh}, &out, &errb); code != 0 || !strings.Contains(out.String(), "__complete") {
			t.Errorf("completion %s: exit %d, %q", sh, code, errb.String())
		}
	}
	var out, errb bytes.Buffer
	if code := cli.Main([]string{"completion", "tcsh"}, &out, &errb); code != 2 || out.Len() != 0 {
		t.Errorf("completion tcsh: exit %d, %q", code, out.String())
	}
}
