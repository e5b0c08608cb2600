package integration

import (
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flyd-dev/flyd/api"
	"github.com/flyd-dev/flyd/internal/testenv"
)

// tmuxSession is `flyd top` running in a tmux of the test's own, on a
// server socket nobody else uses.
type tmuxSession struct {
	t      *testing.T
	server string
}

func startTop(t *testing.T, d *daemon, width, height int, env ...string) *tmuxSession {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		testenv.Skip(t, "tmux is not installed (scripts/test installs it)")
	}
	s := &tmuxSession{t: t, server: "flyd-top-" + strconv.Itoa(freePort(t))}
	// The pane outlives top, so that what it left on the terminal can be
	// read.
	cmd := fmt.Sprintf("%s FLYD_SOCKET=%s %s top; echo TOP-EXITED $?; sleep 600", strings.Join(env, " "), d.socket, flydBin)
	s.tmux("new-session", "-d", "-s", "top", "-x", strconv.Itoa(width), "-y", strconv.Itoa(height), cmd)
	t.Cleanup(func() { _ = exec.Command("tmux", "-L", s.server, "kill-server").Run() })
	return s
}

func (s *tmuxSession) tmux(args ...string) string {
	s.t.Helper()
	out, err := exec.Command("tmux", append([]string{"-L", s.server}, args...)...).CombinedOutput()
	if err != nil {
		s.t.Fatalf("tmux %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func (s *tmuxSession) screen() string { return s.tmux("capture-pane", "-p", "-t", "top") }

func (s *tmuxSession) keys(keys ...string) {
	s.tmux(append([]string{"send-keys", "-t", "top"}, keys...)...)
}

// waitScreen waits until the screen satisfies ok, and returns it.
func (s *tmuxSession) waitScreen(what string, ok func(screen string) bool) string {
	s.t.Helper()
	var screen string
	eventually(s.t, what, func() error {
		if screen = s.screen(); !ok(screen) {
			return fmt.Errorf("the screen is:\n%s", screen)
		}
		return nil
	})
	return screen
}

var tickLine = regexp.MustCompile(`tick (\d+)`)

// lastTick is the highest tick number in text, 0 without any.
func lastTick(text string) int {
	n := 0
	for _, m := range tickLine.FindAllStringSubmatch(text, -1) {
		if v, _ := strconv.Atoi(m[1]); v > n {
			n = v
		}
	}
	return n
}

// TestTop drives `flyd top` in tmux against a real daemon: the workloads
// appear; the selected one's log pane shows a line written after the view
// opened; the restart key, confirmed, restarts it and the screen shows
// its new pid; at 80x24 every workload is still on screen; the daemon's
// restart is said and survived; quitting restores the terminal.
func TestTop(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "top.yaml", `
name: alpha
command: ["@PROG@", "signals"]
---
name: ticker
command: ["sh", "-c", "i=0; while :; do i=$((i+1)); echo tick $i; sleep 0.2; done"]
`))
	ticker := d.waitState(t, "ticker", api.StateRunning)
	d.waitState(t, "alpha", api.StateRunning)
	s := startTop(t, d, 120, 40)
	s.waitScreen("both workloads listed", func(sc string) bool {
		return strings.Contains(sc, "alpha") && strings.Contains(sc, "ticker") && strings.Contains(sc, strconv.Itoa(ticker.PID))
	})
	before := lastTick(d.logs(t, "ticker"))
	s.keys("j") // alpha is first by name: down to ticker
	s.waitScreen("ticker's log, past what it held when the view opened", func(sc string) bool {
		return strings.Contains(sc, "log of ticker") && lastTick(sc) > before
	})

	s.keys("r")
	s.waitScreen("the restart asking to be confirmed", func(sc string) bool { return strings.Contains(sc, "restart ticker? [y/N]") })
	s.keys("y")
	var restarted *api.Workload
	eventually(t, "ticker restarted", func() error {
		if restarted = d.get(t, "ticker"); restarted.PID == ticker.PID || restarted.State != api.StateRunning {
			return fmt.Errorf("pid %d, state %s", restarted.PID, restarted.State)
		}
		return nil
	})
	s.waitScreen("the new pid on screen", func(sc string) bool {
		return strings.Contains(sc, strconv.Itoa(restarted.PID)) && !strings.Contains(sc, " "+strconv.Itoa(ticker.PID)+" ")
	})

	s.tmux("resize-window", "-t", "top", "-x", "80", "-y", "24")
	sc := s.waitScreen("the view at 80x24", func(sc string) bool {
		return strings.Contains(sc, "flyd top") && strings.Contains(sc, "alpha") && strings.Contains(sc, "ticker") && strings.Contains(sc, "log of ticker")
	})
	lines := strings.Split(strings.TrimRight(sc, "\n"), "\n")
	if len(lines) > 24 {
		t.Errorf("%d lines on a 24-line terminal", len(lines))
	}
	for _, l := range lines {
		if n := len([]rune(l)); n > 80 {
			t.Errorf("a line of %d columns on an 80-column terminal: %q", n, l)
		}
	}

	d.kill(t)
	s.waitScreen("the daemon's absence said", func(sc string) bool { return strings.Contains(sc, "DISCONNECTED") })
	d = startDaemon(t, inDir(d.dir))
	s.waitScreen("reconnected", func(sc string) bool {
		return !strings.Contains(sc, "DISCONNECTED") && strings.Contains(sc, "reconnected") && strings.Contains(sc, strconv.Itoa(restarted.PID))
	})

	s.keys("q")
	s.waitScreen("top gone, exit 0", func(sc string) bool { return strings.Contains(sc, "TOP-EXITED 0") })
	if state := strings.TrimSpace(s.tmux("display", "-p", "-t", "top", "#{alternate_on} #{cursor_flag}")); state != "0 1" {
		t.Errorf("after quitting: alternate screen and cursor %q, want \"0 1\" (the terminal as it was)", state)
	}
	d.mustCLI(t, "stop", "alpha", "ticker")
}

// runningRow is a row of the workloads table of a running workload (the
// events pane says "running" too).
var runningRow = regexp.MustCompile(`(?m)^\w+ +native +running`)

// colour matches an SGR sequence that sets a colour (30–37, 90–97, 38;…).
var colour = regexp.MustCompile(`\x1b\[(?:[0-9;]*;)?(?:3[0-8]|9[0-7])[;m]`)

// TestTopHonoursNoColor: the same screen has colours, and none under
// NO_COLOR; Ctrl-C leaves the terminal as q does.
func TestTopHonoursNoColor(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	// Two: the selected row is in reverse video, the other in its
	// state's colour.
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "two.yaml", "name: one\ncommand: [\"@PROG@\", signals]\n---\nname: two\ncommand: [\"@PROG@\", signals]\n"))
	d.waitState(t, "one", api.StateRunning)
	d.waitState(t, "two", api.StateRunning)
	for _, tt := range []struct {
		env      []string
		coloured bool
		quit     string
	}{{nil, true, "q"}, {[]string{"NO_COLOR=1"}, false, "C-c"}} {
		s := startTop(t, d, 100, 30, tt.env...)
		s.waitScreen("the workloads listed", func(sc string) bool { return len(runningRow.FindAllString(sc, -1)) == 2 })
		styled := s.tmux("capture-pane", "-e", "-p", "-t", "top")
		if got := colour.MatchString(styled); got != tt.coloured {
			t.Errorf("env %v: colours on screen %v, want %v:\n%q", tt.env, got, tt.coloured, styled)
		}
		s.keys(tt.quit)
		s.waitScreen("top gone", func(sc string) bool { return strings.Contains(sc, "TOP-EXITED 0") })
		if state := strings.TrimSpace(s.tmux("display", "-p", "-t", "top", "#{alternate_on} #{cursor_flag}")); state != "0 1" {
			t.Errorf("after %s: alternate screen and cursor %q, want \"0 1\"", tt.quit, state)
		}
	}
	d.mustCLI(t, "stop", "one", "two")
}

// firstFrameWithin bounds how long `flyd top` may take to draw its first
// frame: a start and one draw, far below the 5 s a terminal query that
// is never answered would wait.
var firstFrameWithin = 500 * time.Millisecond * time.Duration(timeScale())

// TestTopFirstFrameOnASilentTerminal: on a terminal that answers no query
// (a plain pty, as many a CI's terminal is, with a TERM that is neither
// screen's nor tmux's) `flyd top` draws its first frame at once: nothing
// it might ask the terminal holds it up. It quits on q as anywhere.
func TestTopFirstFrameOnASilentTerminal(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	cmd := exec.Command(flydBin, "top")
	cmd.Env = append(cleanEnv(), "FLYD_SOCKET="+d.socket)
	start := time.Now()
	p := startPty(t, 100, 30, "xterm-256color", cmd)
	p.waitOutput("the first frame", 2*firstFrameWithin+5*time.Second, func(out string) bool { return strings.Contains(out, "flyd top") })
	took := time.Since(start)
	t.Logf("the first frame in %s", took.Round(time.Millisecond))
	if took > firstFrameWithin {
		t.Errorf("the first frame took %s on a terminal that answers no query, want at most %s", took.Round(time.Millisecond), firstFrameWithin)
	}
	p.send("q")
	if code := p.wait(); code != 0 {
		t.Errorf("flyd top exited %d after q; it wrote %q", code, p.output())
	}
}
