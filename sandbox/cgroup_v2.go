package sandbox

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/flyd-dev/flyd/errdefs"
)

// enableControllers turns on, in every cgroup from the mount down to the
// parent (the mount alone for ""), those of v2Controllers that are available there and not yet on,
// and returns the ones the parent's children get. Writing to a cgroup that
// itself holds processes fails with EBUSY ("no internal processes"): under
// systemd that is a service's own cgroup until the daemon moves into a
// leaf of it.
func enableControllers(mount, parent string) ([]string, error) {
	segs := []string{""}
	if parent != "" {
		segs = append(segs, strings.Split(parent, "/")...)
	}
	dir := mount
	for _, seg := range segs {
		dir = filepath.Join(dir, seg)
		avail, err := readWords(filepath.Join(dir, "cgroup.controllers"))
		if err != nil {
			return nil, fmt.Errorf("enable cgroup controllers: %w", err)
		}
		on, err := readWords(filepath.Join(dir, "cgroup.subtree_control"))
		if err != nil {
			return nil, fmt.Errorf("enable cgroup controllers: %w", err)
		}
		for _, ctrl := range v2Controllers {
			if !slices.Contains(avail, ctrl) || slices.Contains(on, ctrl) {
				continue
			}
			err := writeCgroupFile(filepath.Join(dir, "cgroup.subtree_control"), "+"+ctrl)
			if errors.Is(err, unix.EBUSY) {
				return nil, fmt.Errorf("enable cgroup controller %s in %s, which holds processes of its own (move them into a leaf cgroup first): %w", ctrl, dir, errdefs.ErrUnavailable)
			}
			if err != nil {
				return nil, fmt.Errorf("enable cgroup controller %s: %w", ctrl, err)
			}
		}
	}
	on, err := readWords(filepath.Join(dir, "cgroup.subtree_control"))
	if err != nil {
		return nil, fmt.Errorf("enable cgroup controllers: %w", err)
	}
	var out []string
	for _, ctrl := range v2Controllers {
		if slices.Contains(on, ctrl) {
			out = append(out, ctrl)
		}
	}
	return out, nil
}
