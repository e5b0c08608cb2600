package execenv

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/flyd-dev/flyd/carriers"
	"github.com/flyd-dev/flyd/errdefs"
)

// DefaultPath is the PATH a workload, and what flyd runs for it, gets
// unless its spec sets one: the daemon's own environment never leaks in.
const DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// LookPath resolves a bare program name against env's PATH, not the
// daemon's: the first regular, executable file of that name in an
// absolute directory (a relative entry would be relative to the daemon's
// working directory, which means nothing to the workload). A name with a
// slash is taken as it is. The error never quotes the PATH: it is a value
// of the environment.
func LookPath(name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	path, _ := carriers.LookupEnv(env, "PATH")
	for _, dir := range filepath.SplitList(path) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue
		}
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && unix.Access(p, unix.X_OK) == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("exec %s: not found in the workload's PATH: %w", name, errdefs.ErrNotFound)
}

// FillEnv adds HOME, USER and LOGNAME for the account unless env sets them.
func FillEnv(a *Account, env []string) []string {
	out := append([]string(nil), env...)
	for _, kv := range [][2]string{{"HOME", a.Home}, {"USER", a.Name}, {"LOGNAME", a.Name}} {
		if _, set := carriers.LookupEnv(env, kv[0]); kv[1] != "" && !set {
			out = append(out, kv[0]+"="+kv[1])
		}
	}
	return out
}
