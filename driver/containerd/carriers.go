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

// writeCarriers writes the files into the container's snapshot, owned by
// the container's user: /codefly/configuration 0500, files 0400.
func (d *Driver) writeCarriers(ctx context.Context, c *containerd.Client, ctr containerd.Container, files []carriers.File) error {
	s, err := ctr.Spec(ctx)
	if err != nil {
		return fmt.Errorf("carriers: %w", err)
	}
	uid, gid := int(s.Process.User.UID), int(s.Process.User.GID)
	info, err := ctr.Info(ctx)
	if err != nil {
		return fmt.Errorf("carriers: %w", err)
	}
	mounts, err := c.SnapshotService(info.Snapshotter).Mounts(ctx, info.SnapshotKey)
	if err != nil {
		return fmt.Errorf("carriers: snapshot mounts: %w", err)
	}
	err = mount.WithTempMount(ctx, mounts, func(root string) error {
		r, err := os.OpenRoot(root)
		if err != nil {
			return err
		}
		defer r.Close()
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
	})
	if err != nil {
		return fmt.Errorf("carriers: %w", err)
	}
	return nil
}
