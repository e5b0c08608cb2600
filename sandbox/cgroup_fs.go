package sandbox

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// v1Controllers are the v1 hierarchies flyd uses, in the order a thread
// enters them. The first one present is the primary: every workload
// cgroup is made there, its path names the cgroup and its cgroup.procs is
// read. The freezer comes first because stop needs it whatever the
// limits; a workload joins the others only for a limit it has (see
// Create), as systemd does with its accounting options: on v1 every
// hierarchy costs a mkdir and a thread move per start. cpuset, devices,
// blkio and name=systemd are left alone: flyd sets no limit there, and
// systemd owns its own hierarchy.
var v1Controllers = []string{"freezer", "memory", "pids", "cpu"}

// v2Controllers are the controllers flyd enables for workloads on v2.
var v2Controllers = []string{"memory", "pids", "cpu"}

// hierarchy is one mounted cgroup tree.
type hierarchy struct {
	ctrl  string // the v1 controller flyd uses it for; "" on v2
	mount string // where it is mounted
	// root is the mount's root inside the tree: what /proc/PID/cgroup
	// shows for the mount point itself ("/" unless a sub-tree is mounted).
	root string
}

// dir is the directory of the cgroup that /proc/PID/cgroup shows as p,
// or false if that cgroup is outside the mounted part of the tree.
func (h hierarchy) dir(p string) (string, bool) {
	rel, ok := strings.CutPrefix(path.Clean(p), h.root)
	if !ok || (rel != "" && h.root != "/" && rel[0] != '/') {
		return "", false
	}
	return filepath.Join(h.mount, rel), true
}

// layout is what a host offers: one v2 tree, or v1 trees by controller.
// sock is the v2 tree where a workload's sockets are told apart (see
// cgroup_socket.go): the one tree on v2, a hybrid host's bare "unified"
// tree beside its v1 hierarchies, none on a host of v1 alone.
type layout struct {
	version int
	hier    []hierarchy
	sock    *hierarchy
}

// discoverLayout reads a mount table (/proc/self/mountinfo). v2 wins when
// /sys/fs/cgroup itself is cgroup2 or a cgroup2 mount offers every
// controller flyd limits; a hybrid host's bare "unified" tree does not, so
// there the v1 hierarchies are used. A cgroup2 tree without controllers is
// the last resort: it still gives birth into a cgroup and race-free kill,
// but no limits.
func discoverLayout(mountinfo string) (layout, error) {
	mounts, err := readCgroupMounts(mountinfo)
	if err != nil {
		return layout{}, err
	}
	var v1 layout
	var unified, bare *cgroupMount
	for i := range mounts {
		m := &mounts[i]
		if !m.v2 {
			for _, c := range v1Controllers {
				if slices.Contains(m.opts, c) && !slices.ContainsFunc(v1.hier, func(h hierarchy) bool { return h.ctrl == c }) {
					v1.hier = append(v1.hier, hierarchy{ctrl: c, mount: m.point, root: m.root})
				}
			}
			continue
		}
		if m.point == "/sys/fs/cgroup" {
			unified = m
			break
		}
		ctrls, _ := readWords(filepath.Join(m.point, "cgroup.controllers"))
		if unified == nil && containsAll(ctrls, v2Controllers) {
			unified = m
		}
		if bare == nil {
			bare = m
		}
	}
	switch {
	case unified != nil:
		h := hierarchy{mount: unified.point, root: unified.root}
		return layout{version: 2, hier: []hierarchy{h}, sock: &h}, nil
	case len(v1.hier) > 0:
		slices.SortStableFunc(v1.hier, func(a, b hierarchy) int {
			return slices.Index(v1Controllers, a.ctrl) - slices.Index(v1Controllers, b.ctrl)
		})
		v1.version = 1
		if bare != nil {
			v1.sock = &hierarchy{mount: bare.point, root: bare.root}
		}
		return v1, nil
	case bare != nil:
		h := hierarchy{mount: bare.point, root: bare.root}
		return layout{version: 2, hier: []hierarchy{h}, sock: &h}, nil
	}
	return layout{}, errors.New("no cgroup filesystem is mounted")
}

type cgroupMount struct {
	point, root string
	v2          bool
	opts        []string // super options; v1 controllers are among them
}

// readCgroupMounts lists the cgroup and cgroup2 mounts in a mountinfo file.
func readCgroupMounts(file string) ([]cgroupMount, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("read mount table: %w", err)
	}
	var out []cgroupMount
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		// ID PARENT MAJ:MIN ROOT POINT OPTS [OPTIONAL...] - TYPE SOURCE SUPER
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		fields, tail := strings.Fields(pre), strings.Fields(post)
		if !ok || len(fields) < 5 || len(tail) < 3 {
			continue
		}
		if tail[0] != "cgroup" && tail[0] != "cgroup2" {
			continue
		}
		out = append(out, cgroupMount{
			point: mountinfoPath(fields[4]),
			root:  mountinfoPath(fields[3]),
			v2:    tail[0] == "cgroup2",
			opts:  strings.Split(tail[2], ","),
		})
	}
	return out, sc.Err()
}

// procCgroups reads a /proc/.../cgroup file into the path of each
// hierarchy in l, in l's order; "" where the file names none.
func procCgroups(file string, l layout) ([]string, error) {
	data, err := readFile(file)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(l.hier))
	for line := range strings.Lines(string(data)) {
		// ID:CONTROLLERS:PATH; v2 is "0::PATH". PATH may itself hold ':'.
		parts := strings.SplitN(strings.TrimSuffix(line, "\n"), ":", 3)
		if len(parts) != 3 {
			continue
		}
		ctrls := strings.Split(parts[1], ",")
		for i, h := range l.hier {
			if (l.version == 2 && parts[0] == "0" && parts[1] == "") ||
				(l.version == 1 && slices.Contains(ctrls, h.ctrl)) {
				out[i] = parts[2]
			}
		}
	}
	return out, nil
}

// writeCgroupFile writes value to a cgroup control file in one write(2):
// the kernel parses each write on its own, so a value must not be split.
func writeCgroupFile(file, value string) error {
	fd, err := unix.Open(file, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: file, Err: err}
	}
	defer unix.Close(fd)
	for {
		_, err = unix.Write(fd, []byte(value))
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		return &os.PathError{Op: "write " + strconv.Quote(value) + " to", Path: file, Err: err}
	}
	return nil
}

// readInts reads a file of one integer a line, as cgroup.procs is.
func readInts(file string) ([]int, error) {
	data, err := readFile(file)
	if err != nil {
		return nil, err
	}
	var out []int
	for _, w := range strings.Fields(string(data)) {
		n, err := strconv.Atoi(w)
		if err != nil {
			return nil, fmt.Errorf("%s: %q is not a number", file, w)
		}
		out = append(out, n)
	}
	return out, nil
}

// readWords reads a file of space-separated words, as cgroup.controllers is.
func readWords(file string) ([]string, error) {
	data, err := readFile(file)
	return strings.Fields(string(data)), err
}

// readKeyed returns key's value from a flat keyed file ("key value"
// lines, as memory.events, memory.oom_control and cgroup.events are), and
// whether the key is there.
func readKeyed(file, key string) (int64, bool, error) {
	data, err := readFile(file)
	if err != nil {
		return 0, false, err
	}
	for line := range strings.Lines(string(data)) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), " ")
		if ok && k == key {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return 0, false, fmt.Errorf("%s: %s is %q, not a number", file, key, v)
			}
			return n, true, nil
		}
	}
	return 0, false, nil
}

func containsAll(have, want []string) bool {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}

// mountinfoPath undoes the kernel's \ooo escaping of space, tab, newline
// and backslash in a mountinfo path.
func mountinfoPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// readFile reads a small file of the kernel's (cgroupfs, procfs) with an
// open, reads and a close: os.ReadFile's stat and its file's bookkeeping
// cost as much again, and a start or stop reads several such files.
func readFile(file string) ([]byte, error) {
	fd, err := unix.Open(file, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: file, Err: err}
	}
	defer unix.Close(fd)
	buf := make([]byte, 0, 512)
	for {
		n, err := unix.Read(fd, buf[len(buf):cap(buf)])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "read", Path: file, Err: err}
		}
		if n == 0 {
			return buf, nil
		}
		buf = buf[:len(buf)+n]
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, len(buf))
		}
	}
}
