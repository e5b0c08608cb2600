package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// maxStackedMounts bounds the unmount loop: more than one mount on a path
// only happens if something outside flyd mounted there too.
const maxStackedMounts = 16

// createNamespace makes a new network namespace with loopback up and binds
// it onto path. The caller holds the directory lock.
//
// A mount point cannot be renamed (EBUSY), so the namespace cannot be built
// under a temporary name. Instead the bind mount is the last step: a crash
// before it leaves an empty file, which isNamespace reports as absent and
// this function replaces; nothing ever sees a namespace with loopback down.
func createNamespace(path string) error {
	if err := unmountAll(path); err != nil {
		return err
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove leftover %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE|os.O_EXCL, 0o444)
	if err != nil {
		return fmt.Errorf("create mount point: %w", err)
	}
	f.Close()

	err = onScratchThread(func() error {
		// unshare(CLONE_NEWNET) moves only this thread; the process's mount
		// namespace, where the bind mount lands, is shared by all threads.
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("unshare network namespace: %w", err)
		}
		if err := loopbackUp(); err != nil {
			return err
		}
		if err := unix.Mount(threadNetNS, path, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind-mount namespace onto %s: %w", path, err)
		}
		return nil
	})
	if err != nil {
		// Until the mount, only this thread held the namespace, and the
		// thread has left it: the kernel frees it. Only the file remains.
		_ = unmountAll(path)
		_ = os.Remove(path)
		return err
	}
	return nil
}

// loopbackUp brings lo up in the calling thread's namespace. A new
// namespace starts with lo down, and then even 127.0.0.1 is unreachable.
func loopbackUp() error {
	// A netlink socket belongs to the namespace of the thread that opens it.
	h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		return fmt.Errorf("open netlink: %w", err)
	}
	defer h.Close()
	lo, err := h.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("find loopback: %w", err)
	}
	if err := h.LinkSetUp(lo); err != nil {
		return fmt.Errorf("bring loopback up: %w", err)
	}
	return nil
}

// unmountAll lazily unmounts everything mounted on path. MNT_DETACH because
// an fd open on the namespace (a concurrent Do) would otherwise make the
// unmount fail with EBUSY; the namespace outlives its name until that fd is
// closed, as it would for a process inside it.
func unmountAll(path string) error {
	for range maxStackedMounts {
		err := unix.Unmount(path, unix.MNT_DETACH)
		switch {
		case errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOENT):
			return nil // not (or no longer) a mount point
		case err != nil:
			return fmt.Errorf("unmount %s: %w", path, err)
		}
	}
	return fmt.Errorf("unmount %s: still mounted after %d unmounts", path, maxStackedMounts)
}
