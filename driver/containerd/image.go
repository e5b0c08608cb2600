package containerd

import (
	"context"
	"errors"
	"fmt"
	"os"

	containerd "github.com/containerd/containerd/v2/client"
	cerrdefs "github.com/containerd/errdefs"

	"github.com/flyd-dev/flyd/driver"
)

// image returns the unpacked image for the task, importing the archive
// when needed, and the snapshotter it is unpacked for.
func (d *Driver) image(ctx context.Context, c *containerd.Client, t *driver.Task) (containerd.Image, string, error) {
	cs := t.Spec.Containerd
	if cs.Archive != "" {
		if err := d.importArchive(ctx, c, cs.Archive, t.Preparing); err != nil {
			return nil, "", err
		}
	}
	img, err := c.GetImage(ctx, cs.Image)
	if cerrdefs.IsNotFound(err) && cs.Archive == "" {
		img, err = d.pull(ctx, c, cs.Image, t.Workload, t.Preparing)
	}
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return nil, "", fmt.Errorf("%w: image %q is not in containerd namespace %q and archive %s does not contain it",
				driver.ErrExec, cs.Image, d.ns(), cs.Archive)
		}
		return nil, "", err
	}
	sn, err := d.unpack(ctx, img)
	if err != nil {
		return nil, "", err
	}
	return img, sn, nil
}

func (d *Driver) importArchive(ctx context.Context, c *containerd.Client, archive string, preparing func(string)) error {
	fi, err := os.Stat(archive)
	if err != nil {
		return fmt.Errorf("%w: image archive: %v", driver.ErrExec, err)
	}
	id := fmt.Sprintf("%s\x00%d\x00%d", archive, fi.Size(), fi.ModTime().UnixNano())
	d.importMu.Lock()
	defer d.importMu.Unlock()
	if d.imported[id] {
		return nil
	}
	if preparing != nil {
		preparing("importing " + archive)
	}
	f, err := os.Open(archive)
	if err != nil {
		return fmt.Errorf("%w: image archive: %v", driver.ErrExec, err)
	}
	defer f.Close()
	imgs, err := c.Import(ctx, f)
	if err != nil {
		return fmt.Errorf("%w: import image archive %s: %v", driver.ErrExec, archive, err)
	}
	if len(imgs) == 0 {
		return fmt.Errorf("%w: image archive %s holds no named image", driver.ErrExec, archive)
	}
	if d.imported == nil {
		d.imported = map[string]bool{}
	}
	d.imported[id] = true
	return nil
}

// unpack unpacks img for overlayfs, or native when overlayfs fails; the
// choice is remembered.
func (d *Driver) unpack(ctx context.Context, img containerd.Image) (string, error) {
	d.mu.Lock()
	chosen := d.snapshotter
	d.mu.Unlock()
	cands := []string{"overlayfs", "native"}
	if chosen != "" {
		cands = []string{chosen}
	}
	var errs []error
	for _, sn := range cands {
		ok, err := img.IsUnpacked(ctx, sn)
		if err == nil && !ok {
			err = img.Unpack(ctx, sn)
		}
		if err == nil {
			d.mu.Lock()
			d.snapshotter = sn
			d.mu.Unlock()
			return sn, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", sn, err))
	}
	return "", fmt.Errorf("unpack image %s: %w", img.Name(), errors.Join(errs...))
}
