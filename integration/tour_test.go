package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/flyd-dev/flyd/api"
)

// tourBlock is the shell block of README.md's "A five-minute tour".
func tourBlock(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	_, after, ok := strings.Cut(readme, "\n## A five-minute tour\n")
	if !ok {
		t.Fatal(`README.md has no section "A five-minute tour"`)
	}
	_, after, ok = strings.Cut(after, "\n```sh\n")
	if !ok {
		t.Fatal("the tour has no ```sh block")
	}
	block, _, ok := strings.Cut(after, "\n```\n")
	if !ok {
		t.Fatal("the tour's ```sh block does not end")
	}
	return block + "\n"
}

// TestTour runs README.md's tour as a user would after scripts/run: the
// demo workload applied as scripts/run applies it, then the tour's lines,
// as they are written (only its port made one of the test's own), by bash
// in a directory whose bin/flyd is the CLI, each line to succeed. What its
// comments promise is on its output.
func TestTour(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"bash", "curl", "jq", "/usr/bin/python3"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the tour needs %s (scripts/run and scripts/test install it): %v", tool, err)
		}
	}
	d := startDaemon(t)

	// scripts/run's demo: its log says its shell's pid.
	d.mustCLI(t, "apply", "-f", "../scripts/demo/")
	ticker := d.waitState(t, "ticker", api.StateRunning)
	d.waitLog(t, "ticker", fmt.Sprintf(" from pid %d\n", ticker.PID))

	port := strconv.Itoa(freePort(t))
	script := strings.ReplaceAll(tourBlock(t), "18080", port)
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(flydBin, filepath.Join(dir, "bin", "flyd")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tour.sh"), []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	outPath := filepath.Join(dir, "out")
	out, err := os.Create(outPath)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 6*waitFor)
	defer cancel()
	// -e: a line that fails fails the tour; -x: the output says which.
	cmd := exec.CommandContext(ctx, "bash", "-e", "-o", "pipefail", "-x", "tour.sh")
	cmd.Dir = dir
	cmd.Env = append(cleanEnv(), "FLYD_SOCKET="+d.socket)
	cmd.Stdout, cmd.Stderr = out, out
	// The tour leaves `flyd events` running in the background: it and
	// the shell are a process group of their own, ended when the test is.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	err = cmd.Wait()
	b, _ := os.ReadFile(outPath)
	text := string(b)
	if err != nil {
		t.Fatalf("the tour failed (%v):\n%s", err, text)
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^ticker +native +running +\d+ +0 `),
		regexp.MustCompile(`(?m)^web up: running, healthy, pid \d+`),
		regexp.MustCompile(`(?m)^web +native +running +\d+ +0 +http:` + port + ` `),
		regexp.MustCompile(`(?m)^web +native +running +\d+ +1 +http:` + port + ` .*killed by SIGKILL$`),
	} {
		if !want.MatchString(text) {
			t.Errorf("the tour's output has no line matching %s:\n%s", want, text)
		}
	}
	// The events in the background are not looked at: the stream may
	// begin after the stop and the removal it would tell.
	if _, err := d.client.Get(context.Background(), "web"); err == nil {
		t.Error("web is still there after the tour's rm")
	}
	d.mustCLI(t, "stop", "ticker")
}
