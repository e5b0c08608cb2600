package integration

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flyd-dev/flyd/internal/testenv"
)

// bashCompletion runs real bash with `flyd completion bash` sourced, has
// its completion function complete words (the last the one being
// completed) as bash would at a TAB, and returns what it offers.
func bashCompletion(t *testing.T, script, socket string, words ...string) (offered []string, stderr string) {
	t.Helper()
	quoted := []string{strconv.Quote(flydBin)}
	for _, w := range words {
		quoted = append(quoted, strconv.Quote(w))
	}
	prog := "source " + strconv.Quote(script) + "\n" +
		"COMP_WORDS=(" + strings.Join(quoted, " ") + ")\n" +
		"COMP_CWORD=" + strconv.Itoa(len(words)) + "\n" +
		"COMP_LINE=\"${COMP_WORDS[*]}\"; COMP_POINT=${#COMP_LINE}\n" +
		"_flyd\n" +
		`printf '%s\n' "${COMPREPLY[@]}"` + "\n"
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "--norc", "--noprofile", "-c", prog)
	cmd.Env = append(cleanEnv(), "FLYD_SOCKET="+socket)
	cmd.Dir = filepath.Dir(script)
	out, errOut, code := runCmd(t, cmd)
	if code != 0 {
		t.Fatalf("bash completing %q: exit %d: %s", words, code, errOut)
	}
	for _, l := range strings.Split(out, "\n") {
		if l != "" {
			offered = append(offered, l)
		}
	}
	return offered, errOut
}

func TestCompletionBash(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		testenv.Skip(t, "bash is not installed")
	}
	d := startDaemon(t)
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "web.yaml", "name: web-a\ncommand: [\"@PROG@\", print, \"1\"]\nrestart: {policy: never}\n"))
	d.mustCLI(t, "up", "-p", "ci-7", "-f", d.writeSpec(t, "stack.yaml", "kind: network\nname: net\n---\n"+
		"name: api\nnetwork: net\ncommand: [\"@PROG@\", print, \"1\"]\nrestart: {policy: never}\n"))
	script := filepath.Join(d.dir, "flyd.bash")
	if err := os.WriteFile(script, []byte(d.mustCLI(t, "completion", "bash")), 0o644); err != nil {
		t.Fatal(err)
	}

	for _, tt := range []struct {
		words []string
		want  []string
		exact bool
	}{
		{[]string{"st"}, []string{"start", "status", "stop"}, true},
		{[]string{"logs", "--t"}, []string{"--tail", "--timestamps"}, true},
		{[]string{"stop", ""}, []string{"ci-7.api", "web-a"}, true},
		{[]string{"-p", "ci-7", "logs", "-f", ""}, []string{"api"}, true},
		{[]string{"inspect", "--project", "ci-7", "a"}, []string{"api"}, true},
		{[]string{"-p", ""}, []string{"ci-7"}, true},
		{[]string{"exec", "--network", ""}, []string{"ci-7.net"}, true},
		{[]string{"-p", "ci-7", "exec", "--network", ""}, []string{"net"}, true},
		{[]string{"networks", "rm", "ci"}, []string{"ci-7.net"}, true},
		{[]string{"apply", "-f", "we"}, []string{"web.yaml"}, true},
		{[]string{"completion", ""}, []string{"bash", "fish", "zsh"}, true},
	} {
		got, stderr := bashCompletion(t, script, d.socket, tt.words...)
		if !slices.Equal(got, tt.want) || stderr != "" {
			t.Errorf("flyd %s<TAB>: bash offers %q (stderr %q), want %q", strings.Join(tt.words, " "), got, stderr, tt.want)
		}
	}

	// The script registers itself for flyd.
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	out, _, _ := runCmd(t, exec.CommandContext(ctx, "bash", "--norc", "--noprofile", "-c", "source "+strconv.Quote(script)+"; complete -p flyd"))
	if strings.TrimSpace(out) != "complete -F _flyd flyd" {
		t.Errorf("complete -p flyd: %q", out)
	}

	// With no daemon: commands and flags as ever, no names, not a word
	// on stderr, and no wait.
	none := filepath.Join(d.dir, "none.sock")
	start := time.Now()
	got, stderr := bashCompletion(t, script, none, "stop", "")
	if len(got) != 0 || stderr != "" {
		t.Errorf("without a daemon, stop <TAB>: %q, stderr %q", got, stderr)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("without a daemon, stop <TAB> took %v", took)
	}
	if got, _ := bashCompletion(t, script, none, "stop", "--f"); !slices.Equal(got, []string{"--force"}) {
		t.Errorf("without a daemon, stop --f<TAB>: %q", got)
	}
}

// zsh and fish are judged where they are installed: fish completes the
// line itself (complete -C); zsh's script must parse.
func TestCompletionZshFish(t *testing.T) {
	requireRoot(t)
	dir := t.TempDir()
	ran := false
	if _, err := exec.LookPath("fish"); err == nil {
		ran = true
		script := filepath.Join(dir, "flyd.fish")
		out, _, _ := runCLI(t, filepath.Join(dir, "none.sock"), "completion", "fish")
		if err := os.WriteFile(script, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		defer cancel()
		cmd := exec.CommandContext(ctx, "fish", "--no-config", "-c",
			"function flyd; "+strconv.Quote(flydBin)+" $argv; end; source "+strconv.Quote(script)+"; complete -C 'flyd st'")
		cmd.Env = append(cleanEnv(), "FLYD_SOCKET="+filepath.Join(dir, "none.sock"))
		got, errOut, code := runCmd(t, cmd)
		var names []string
		for _, l := range strings.Split(strings.TrimSpace(got), "\n") {
			names = append(names, strings.Fields(l + " x")[0])
		}
		if code != 0 || !slices.Equal(names, []string{"start", "status", "stop"}) {
			t.Errorf("fish: complete -C 'flyd st': exit %d, %q %q", code, got, errOut)
		}
	}
	if _, err := exec.LookPath("zsh"); err == nil {
		ran = true
		script := filepath.Join(dir, "flyd.zsh")
		out, _, _ := runCLI(t, filepath.Join(dir, "none.sock"), "completion", "zsh")
		if err := os.WriteFile(script, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, errOut, code := runCmd(t, exec.Command("zsh", "-n", script)); code != 0 {
			t.Errorf("zsh -n: %s", errOut)
		}
	}
	if !ran {
		t.Skip("neither zsh nor fish is installed: only bash's completion is tested")
	}
}
