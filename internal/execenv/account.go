// Package execenv is what every program flyd starts for a workload shares,
// whichever runtime or probe starts it: the default PATH, how a bare
// program name is found in the workload's own PATH, and the user it runs
// as, resolved into credentials, so that a workload and its health check
// never find different binaries or run with different rights. It is not
// for the daemon's own environment or identity.
package execenv

import (
	"errors"
	"fmt"
	"os/user"
	"strconv"
	"syscall"
)

// Account is a user as a workload runs as it.
type Account struct {
	Name     string
	Home     string
	UID, GID uint32
	Groups   []uint32 // supplementary, without GID
}

// Lookup resolves a user name or numeric uid: its uid, primary gid and
// exactly its own supplementary groups (never the daemon's).
func Lookup(name string) (*Account, error) {
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
	a := &Account{Name: u.Username, Home: u.HomeDir, UID: uint32(uid), GID: uint32(gid)}
	ids, err := u.GroupIds()
	if err != nil {
		return nil, fmt.Errorf("groups: %w", err)
	}
	for _, s := range ids {
		if g, err := strconv.ParseUint(s, 10, 32); err == nil && uint32(g) != a.GID {
			a.Groups = append(a.Groups, uint32(g))
		}
	}
	return a, nil
}

// Credential is what a process started as the account gets.
func (a *Account) Credential() *syscall.Credential {
	return &syscall.Credential{Uid: a.UID, Gid: a.GID, Groups: a.Groups}
}
