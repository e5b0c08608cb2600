package native

import (
	"errors"
	"fmt"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/flyd-dev/flyd/carriers"
)

type account struct {
	name     string
	home     string
	uid, gid uint32
	groups   []uint32
}

// lookupUser resolves a user name or numeric uid to the credentials the
// workload runs with: its uid, primary gid and exactly its own supplementary
// groups (never the daemon's).
func lookupUser(name string) (*account, error) {
	u, err := user.Lookup(name)
	if err != nil {
		var unknown user.UnknownUserError
		if _, perr := strconv.Atoi(name); perr == nil || errors.As(err, &unknown) {
			if byID, ierr := user.LookupId(name); ierr == nil {
				u, err = byID, nil
			}
		}
	}
	if err != nil {
		return nil, err
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, err
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, err
	}
	a := &account{name: u.Username, home: u.HomeDir, uid: uint32(uid), gid: uint32(gid)}
	ids, err := u.GroupIds()
	if err != nil {
		return nil, fmt.Errorf("groups: %w", err)
	}
	for _, s := range ids {
		if g, err := strconv.ParseUint(s, 10, 32); err == nil && uint32(g) != a.gid {
			a.groups = append(a.groups, uint32(g))
		}
	}
	return a, nil
}

func (a *account) credential() *syscall.Credential {
	return &syscall.Credential{Uid: a.uid, Gid: a.gid, Groups: a.groups}
}

// fillEnv adds HOME, USER and LOGNAME for the account unless the spec set them.
func (a *account) fillEnv(env []string) []string {
	out := append([]string(nil), env...)
	for _, kv := range [][2]string{{"HOME", a.home}, {"USER", a.name}, {"LOGNAME", a.name}} {
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
