package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// lockName is the file whose flock serialises changes to the directory
// between processes. It cannot collide with a network: names never start
// with a dot.
const lockName = ".lock"

// Networks manages the named network namespaces under one directory.
type Networks struct {
	dir string
	// mu keeps goroutines of this process in line before they reach the
	// flock, so that at most one thread at a time blocks in flock(2); it
	// is held with the flock (lock), and so guards next and nextPool too.
	mu sync.Mutex
	// retiring are the links of deleted networks the kernel is still
	// deleting (retire); retireMu guards retireErr, what it refused, and
	// is taken alone, by the goroutines deleting them and by Wait.
	retiring  sync.WaitGroup
	retireMu  sync.Mutex
	retireErr error
	// next is where Connect's search for a free /30 of nextPool starts
	// (under mu and the flock): the links there are, this daemon's and
	// others', are not tried one by one at every network's birth.
	next     int
	nextPool netip.Prefix
}

// Network is one isolated network.
type Network struct {
	Name string
	// Path is the bind-mounted namespace file: what a container runtime
	// joins by path and what setns opens.
	Path string
	// Link is its connection to the host; nil for an island.
	Link *Link
}

// NewNetworks uses dir (created 0755 if missing) to hold one bind-mounted
// namespace file per network. It removes plain files left where a
// namespace was about to be mounted when a daemon died.
func NewNetworks(dir string) (*Networks, error) {
	// Paths leave this process (a runtime joins them), so they must not
	// depend on our working directory.
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("network directory %q: %w", dir, err)
	}
	if _, err := os.Stat(abs); errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(abs, 0o755); err != nil {
			return nil, fmt.Errorf("create network directory: %w", err)
		}
		// Whatever the umask: runtimes and `flyd exec` open paths in here.
		if err := os.Chmod(abs, 0o755); err != nil {
			return nil, fmt.Errorf("create network directory: %w", err)
		}
	}
	n := &Networks{dir: abs}
	if err := n.sweepLeftovers(); err != nil {
		return nil, err
	}
	return n, nil
}

// Dir is the directory holding the namespace files.
func (n *Networks) Dir() string { return n.dir }

// Ensure returns the network, creating its namespace (loopback up) if it
// does not exist. It is idempotent and safe for concurrent calls with the
// same or different names, from this process or another using the same
// directory.
func (n *Networks) Ensure(name string) (*Network, error) {
	nw, err := n.network(name)
	if err != nil {
		return nil, err
	}
	// The common case, a network that exists, takes no lock.
	ok, err := isNamespace(nw.Path)
	if err != nil {
		return nil, err
	}
	if ok {
		return nw, nil
	}
	unlock, err := n.lock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	ok, err = isNamespace(nw.Path)
	if err != nil {
		return nil, err
	}
	if !ok {
		if err := createNamespace(nw.Path); err != nil {
			return nil, fmt.Errorf("create network %q: %w", name, err)
		}
	}
	return nw, nil
}

// Open returns an existing network, or an error wrapping errdefs.ErrNotFound
// if there is none.
func (n *Networks) Open(name string) (*Network, error) {
	nw, err := n.network(name)
	if err != nil {
		return nil, err
	}
	fd, err := openNamespace(nw.Name, nw.Path)
	if err != nil {
		return nil, err
	}
	unix.Close(fd)
	return nw, nil
}

// Delete unmounts and removes a network's namespace file. Deleting a missing
// network is not an error. Processes still inside, and sockets or file
// descriptors opened on it, keep the namespace alive in the kernel; the
// name is free again either way. Its link, found from inside it, is
// taken out of use at once and deleted in the background (Wait).
func (n *Networks) Delete(name string) error { return n.DeleteLinked(name, nil) }

// DeleteLinked is Delete for a caller that keeps the networks' links, told
// the network's (nil: one it does not know of): one link of the host's is
// asked for, by name, and while it is the network's nothing else is; one
// that is not is looked for inside the namespace, as Delete does.
func (n *Networks) DeleteLinked(name string, link *Link) error {
	nw, err := n.network(name)
	if err != nil {
		return err
	}
	unlock, err := n.lock()
	if err != nil {
		return err
	}
	defer unlock()
	// A process or socket may keep the namespace alive after the unmount;
	// its link must go now all the same.
	hh, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		return fmt.Errorf("delete network %q: netlink: %w", name, err)
	}
	defer hh.Close()
	if host, err := hostEnd(hh, nw, link); err != nil {
		return fmt.Errorf("delete network %q: find its link: %w", name, err)
	} else if host != nil {
		if err := n.retire(hh, host, nw); err != nil {
			return fmt.Errorf("delete network %q: link %s: %w", name, host.Attrs().Name, err)
		}
	}
	if err := unmountAll(nw.Path); err != nil {
		return fmt.Errorf("delete network %q: %w", name, err)
	}
	if err := os.Remove(nw.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("delete network %q: %w", name, err)
	}
	return nil
}

// List returns the names of the networks that exist under the directory,
// sorted. A file that is not a mounted namespace is not a network.
func (n *Networks) List() ([]string, error) {
	entries, err := os.ReadDir(n.dir) // sorted by name
	if err != nil {
		return nil, fmt.Errorf("list networks: %w", err)
	}
	names := []string{}
	for _, e := range entries {
		if ValidateName(e.Name()) != nil {
			continue
		}
		ok, err := isNamespace(filepath.Join(n.dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("list networks: %w", err)
		}
		if ok {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

func (n *Networks) network(name string) (*Network, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	return &Network{Name: name, Path: filepath.Join(n.dir, name)}, nil
}

// lock takes the directory's lock. flock belongs to the open file, so it
// also orders goroutines; mu only keeps them from each parking a thread.
func (n *Networks) lock() (unlock func(), err error) {
	n.mu.Lock()
	f, err := os.OpenFile(filepath.Join(n.dir, lockName), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		n.mu.Unlock()
		return nil, fmt.Errorf("lock network directory: %w", err)
	}
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		n.mu.Unlock()
		return nil, fmt.Errorf("lock network directory: %w", err)
	}
	return func() {
		f.Close() // releases the flock
		n.mu.Unlock()
	}, nil
}

// SweepLinks deletes the links of this directory's networks that no
// longer exist: what a daemon that died between deleting a namespace and
// its link leaves behind.
func (n *Networks) SweepLinks() error {
	links, err := n.Links()
	if err != nil {
		return err
	}
	var errs []error
	for name, l := range links {
		if ok, err := isNamespace(filepath.Join(n.dir, name)); err == nil && ok && !strings.HasSuffix(name, retiredSuffix) {
			continue
		}
		if err := disconnect(l); err != nil {
			errs = append(errs, fmt.Errorf("delete link %s of network %q: %w", l.Name, name, err))
		}
	}
	return errors.Join(errs...)
}

// sweepLeftovers removes the empty files a crash leaves between creating a
// mount point and mounting on it. Ensure would reuse them; removing them
// keeps the directory an honest picture of the networks.
func (n *Networks) sweepLeftovers() error {
	unlock, err := n.lock()
	if err != nil {
		return err
	}
	defer unlock()
	entries, err := os.ReadDir(n.dir)
	if err != nil {
		return fmt.Errorf("read network directory: %w", err)
	}
	for _, e := range entries {
		if ValidateName(e.Name()) != nil || !e.Type().IsRegular() {
			continue
		}
		path := filepath.Join(n.dir, e.Name())
		ok, err := isNamespace(path)
		if err != nil {
			return fmt.Errorf("read network directory: %w", err)
		}
		if ok {
			continue
		}
		if info, err := e.Info(); err != nil || info.Size() != 0 {
			continue // not ours to judge
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove leftover network file: %w", err)
		}
	}
	return nil
}

// isNamespace reports whether path is a mounted namespace file. A missing
// path is not an error: it is simply not a network.
func isNamespace(path string) (bool, error) {
	var st unix.Statfs_t
	err := unix.Statfs(path, &st)
	if errors.Is(err, unix.ENOENT) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("inspect %s: %w", path, err)
	}
	return st.Type == unix.NSFS_MAGIC, nil
}
