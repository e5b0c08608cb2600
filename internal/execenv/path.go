package execenv

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

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
	return LookPathAs(name, env, nil)
}

// LookPathAs is LookPath searched as the user of cred (nil: as the
// daemon): a directory the user may not search, or a file it may not
// execute, is passed over as if absent, so that what the daemon sees as
// root (a program under /root) never turns "not found" into "permission
// denied" for a workload of another user. It reads the mode bits, owner
// and group (an ACL that grants more is not read: such a program is not
// found).
func LookPathAs(name string, env []string, cred *syscall.Credential) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	path, _ := lookupEnv(env, "PATH")
	for _, dir := range filepath.SplitList(path) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue
		}
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && unix.Access(p, unix.X_OK) == nil && executableAs(p, cred) {
			return p, nil
		}
	}
	return "", fmt.Errorf("exec %s: not found in the workload's PATH: %w", name, errdefs.ErrNotFound)
}

// executableAs says whether the user of cred may search every directory
// on the way to p, as written and with its symlinks resolved, and execute
// p. Root, and no user (nil), may.
func executableAs(p string, cred *syscall.Credential) bool {
	if cred == nil || cred.Uid == 0 {
		return true
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return false
	}
	for _, q := range []string{p, real} {
		for dir := filepath.Dir(q); ; dir = filepath.Dir(dir) {
			if !permitted(dir, cred) {
				return false
			}
			if dir == "/" {
				break
			}
		}
	}
	return permitted(real, cred)
}

// permitted says whether cred's user may execute p (search it, for a
// directory), by its mode bits.
func permitted(p string, cred *syscall.Credential) bool {
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		return false
	}
	mode := st.Mode & 0o777
	switch {
	case st.Uid == cred.Uid:
		return mode&0o100 != 0
	case st.Gid == cred.Gid || slices.Contains(cred.Groups, st.Gid):
		return mode&0o010 != 0
	}
	return mode&0o001 != 0
}

// FillEnv adds HOME, USER and LOGNAME for the account unless env sets them.
func FillEnv(a *Account, env []string) []string {
	out := append([]string(nil), env...)
	for _, kv := range [][2]string{{"HOME", a.Home}, {"USER", a.Name}, {"LOGNAME", a.Name}} {
		if _, set := lookupEnv(env, kv[0]); kv[1] != "" && !set {
			out = append(out, kv[0]+"="+kv[1])
		}
	}
	return out
}

// lookupEnv is key's value in env, the last occurrence winning, as
// execve's consumers read it.
func lookupEnv(env []string, key string) (string, bool) {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
			return v, true
		}
	}
	return "", false
}
