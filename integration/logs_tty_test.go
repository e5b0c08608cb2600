package integration

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLogsEscapedOnATerminal: a workload's escape sequences (a clipboard
// write, a title, a clear screen) reach a terminal that `flyd logs` writes
// to escaped, with its text, tabs and UTF-8 as they are; `--raw` writes
// them as they are; and a pipe gets the log's bytes exactly.
func TestLogsEscapedOnATerminal(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "esc.yaml", `
name: esc
command: ["sh", "-c", "printf 'before\\t\\303\\251\\344\\270\\226\\n\\033]52;c;ZXZpbA==\\007\\033]0;pwned\\007\\033[2Jafter\\n'; exec sleep 600"]
`))
	const logged = "before\té世\n\x1b]52;c;ZXZpbA==\x07\x1b]0;pwned\x07\x1b[2Jafter\n"
	d.waitLog(t, "esc", "after\n")

	onPty := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(flydBin, append([]string{"logs"}, args...)...)
		cmd.Env = append(cleanEnv(), "FLYD_SOCKET="+d.socket)
		p := startPty(t, 200, 50, "xterm-256color", cmd)
		if code := p.wait(); code != 0 {
			t.Fatalf("flyd logs %s on a terminal: exit %d: %q", strings.Join(args, " "), code, p.output())
		}
		// The terminal's line discipline ends a line with \r\n.
		return strings.ReplaceAll(p.output(), "\r\n", "\n")
	}
	want := `before` + "\t" + `é世` + "\n" + `\x1b]52;c;ZXZpbA==\x07\x1b]0;pwned\x07\x1b[2Jafter` + "\n"
	if got := onPty("esc"); got != want {
		t.Errorf("flyd logs on a terminal wrote %q, want %q", got, want)
	}
	if got := onPty("--raw", "esc"); got != logged {
		t.Errorf("flyd logs --raw on a terminal wrote %q, want the log's bytes %q", got, logged)
	}
	if got, errOut, code := runCLI(t, d.socket, "logs", "esc"); code != 0 || got != logged {
		t.Errorf("flyd logs into a pipe: exit %d, wrote %q (%s), want the log's bytes %q", code, got, errOut, logged)
	}
	d.mustCLI(t, "stop", "esc")
}
