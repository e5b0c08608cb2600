package native

import (
	"fmt"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/flyd-dev/flyd/carriers"
	"github.com/flyd-dev/flyd/internal/account"
)

// fillEnv adds HOME, USER and LOGNAME for the account unless the spec set them.
func fillEnv(a *account.Account, env []string) []string {
	out := append([]string(nil), env...)
	for _, kv := range [][2]string{{"HOME", a.Home}, {"USER", a.Name}, {"LOGNAME", a.Name}} {
		if kv[1] != "" && !hasEnv(env, kv[0]) {
			out = append(out, kv[0]+"="+kv[1])
		}
	}
	return out
}

func hasEnv(env []string, key string) bool {
	_, ok := carriers.LookupEnv(env, key)
	return ok
}

func pathOf(env []string) string {
	p, _ := carriers.LookupEnv(env, "PATH")
	return p
}

// lookPath resolves a bare program name against the workload's own PATH,
// not the daemon's.
func lookPath(file string, env []string) (string, error) {
	if strings.Contains(file, "/") {
		return file, nil
	}
	for _, dir := range filepath.SplitList(pathOf(env)) {
		if dir == "" {
			continue
		}
		p := filepath.Join(dir, file)
		if unix.Access(p, unix.X_OK) == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("exec %s: not found in the workload's PATH", file)
}
