package nix

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/flyd-dev/flyd/driver"
	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/internal/execenv"
	"github.com/flyd-dev/flyd/reaper"
)

func (d *Driver) nixVersion(ctx context.Context, bin string) (string, error) {
	d.mu.Lock()
	v := d.version
	d.mu.Unlock()
	if v != "" {
		return v, nil
	}
	out, err := d.run(ctx, bin, nil, "--version")
	if err != nil {
		return "", fmt.Errorf("%w: %v", errdefs.ErrRuntimeUnavailable, err)
	}
	v = strings.TrimSpace(string(out))
	d.mu.Lock()
	d.version = v
	d.mu.Unlock()
	return v, nil
}

// stderrTail is how many lines of nix's stderr a failure carries.
const stderrTail = 20

// run runs one nix command, returning stdout. Its stderr also goes to log,
// when set, so a build's progress lands in the workload's log.
func (d *Driver) run(ctx context.Context, bin string, log io.Writer, args ...string) ([]byte, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = d.nixEnv()
	cmd.Dir = d.CacheDir
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if log != nil {
		cmd.Stderr = io.MultiWriter(&stderr, log)
	}
	err := reaper.Spawn(func() (int, error) {
		if err := cmd.Start(); err != nil {
			return 0, err
		}
		return cmd.Process.Pid, nil
	})
	if err != nil {
		return nil, fmt.Errorf("%w: nix: %v", errdefs.ErrRuntimeUnavailable, err)
	}
	err = cmd.Wait()
	reaper.Forget(cmd.Process.Pid)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w: nix %s: %v:\n%s", driver.ErrExec, strings.Join(args, " "), err, tail(stderr.String(), stderrTail))
	}
	return stdout.Bytes(), nil
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func (d *Driver) nixEnv() []string {
	env := []string{
		"PATH=" + execenv.DefaultPath,
		"HOME=" + filepath.Join(d.CacheDir, "home"),
		"NIX_CONFIG=" + strings.Join([]string{
			"experimental-features = nix-command flakes",
			"substituters =",
			"flake-registry = " + filepath.Join(d.CacheDir, "registry.json"),
		}, "\n"),
	}
	return append(env, d.Env...)
}
