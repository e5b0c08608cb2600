package health

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/flyd-dev/flyd/carriers"
	"github.com/flyd-dev/flyd/errdefs"
)

// lookPath resolves a bare program name against the probe's own PATH, as
// the workload would, not the daemon's. The error never quotes the PATH:
// it is a value of the environment.
func lookPath(name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	path, _ := carriers.LookupEnv(env, "PATH")
	for _, dir := range filepath.SplitList(path) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue // relative to the daemon's directory means nothing here
		}
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && unix.Access(p, unix.X_OK) == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("exec %s: not found in the probe's PATH: %w", name, errdefs.ErrNotFound)
}
