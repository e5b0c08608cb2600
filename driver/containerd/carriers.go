package containerd

import (
	"context"
	"fmt"
	"os"
	"path"
	"strings"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/mount"

	"github.com/flyd-dev/flyd/carriers"
)

// prepareRootfs writes what flyd gives a container into its snapshot,
// mounted once: /etc/hosts, and the file carriers, owned by the
// container's user uid:gid.
func (d *Driver) prepareRootfs(ctx context.Context, c *containerd.Client, ctr containerd.Container, uid, gid int, hosts []byte, files []carriers.File) error {
	info, err := ctr.Info(ctx)
	if err != nil {
		return fmt.Errorf("container root: %w", err)
	}
	mounts, err := c.SnapshotService(info.Snapshotter).Mounts(ctx, info.SnapshotKey)
	if err != nil {
		return fmt.Errorf("container root: snapshot mounts: %w", err)
	}
	return mount.WithTempMount(ctx, mounts, func(root string) error {
		r, err := os.OpenRoot(root)
		if err != nil {
			return fmt.Errorf("container root: %w", err)
		}
		defer r.Close()
		if err := writeHosts(r, hosts); err != nil {
			return fmt.Errorf("/etc/hosts: %w", err)
		}
		if len(files) == 0 {
			return nil
		}
		if err := writeCarriers(r, uid, gid, files); err != nil {
			return fmt.Errorf("carriers: %w", err)
		}
		return nil
	})
}

// writeCarriers writes the files into the container's root r, owned by
// the container's user: /codefly/configuration 0500, files 0400.
func writeCarriers(r *os.Root, uid, gid int, files []carriers.File) error {
	rel := strings.TrimPrefix(ConfigurationDir, "/")
	if err := r.MkdirAll(path.Dir(rel), 0o755); err != nil {
		return err
	}
	if err := r.RemoveAll(rel); err != nil {
		return err
	}
	if err := r.Mkdir(rel, 0o700); err != nil {
		return err
	}
	for _, f := range files {
		if strings.ContainsAny(f.Key, "/\x00") || f.Key == "" || f.Key == "." || f.Key == ".." {
			return fmt.Errorf("carrier key %q is not a file name", f.Key)
		}
		name := rel + "/" + f.Key
		fh, err := r.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o400)
		if err != nil {
			return fmt.Errorf("carrier for %s: %w", f.Key, err)
		}
		_, werr := fh.WriteString(f.Value)
		if werr == nil {
			werr = fh.Chown(uid, gid)
		}
		if werr == nil {
			werr = fh.Chmod(0o400)
		}
		if cerr := fh.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			// The key is not secret; the value never appears.
			return fmt.Errorf("carrier for %s: %w", f.Key, werr)
		}
	}
	if err := r.Lchown(rel, uid, gid); err != nil {
		return err
	}
	return r.Chmod(rel, 0o500)
}
