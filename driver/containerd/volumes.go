package containerd

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	cerrdefs "github.com/containerd/errdefs"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/flyd-dev/flyd/driver"
	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/spec"
)

// Volumes. A bind mount mounts its host path as it is, and never removes
// it. A named volume is a directory of VolumesDir named after the volume's
// full name, PROJECT.NAME (a default project's keeps NAME), so that two
// copies of a stack never share one: it is made on first use, owned by
// the container's user, and kept across runs, replaces and daemon
// restarts until RemoveVolumes removes the project's. Only root reaches
// VolumesDir (0700); a container reaches its volume through the mount.

// volumeMounts are the task's volumes as OCI mounts, with the names of
// the named volumes' directories, which must exist before the task does.
// A host path that does not exist is refused, naming the entry.
func (d *Driver) volumeMounts(t *driver.Task) (mounts []specs.Mount, named []string, err error) {
	project := spec.ProjectOf(t.Workload)
	for i, s := range t.Spec.Containerd.Volumes {
		field := fmt.Sprintf("containerd.volumes[%d]", i)
		v, err := spec.ParseVolume(s)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: %s: %v", driver.ErrExec, field, err)
		}
		src := v.Source
		if v.Named() {
			if d.VolumesDir == "" {
				return nil, nil, fmt.Errorf("%w: %s: this runtime keeps no named volumes (it has no volumes directory)", driver.ErrExec, field)
			}
			name := spec.FullName(project, v.Source)
			named = append(named, name)
			src = filepath.Join(d.VolumesDir, name)
		} else if _, err := os.Stat(src); err != nil {
			return nil, nil, fmt.Errorf("%w: %s: the host path %s: %v", driver.ErrExec, field, src, errors.Unwrap(err))
		}
		mode := "rw"
		if v.ReadOnly {
			mode = "ro"
		}
		mounts = append(mounts, specs.Mount{
			Destination: v.Target,
			Type:        "bind",
			Source:      src,
			Options:     []string{"rbind", "rprivate", mode},
		})
	}
	return mounts, named, nil
}

// ensureVolumes makes the named volumes' directories that do not exist
// yet, each owned by uid:gid (the container's user, who must be able to
// write its new volume), 0755. One that exists is used as it is, but
// must be a directory: never a link that would mount something else.
func (d *Driver) ensureVolumes(names []string, uid, gid int) error {
	if err := os.Mkdir(d.VolumesDir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("volumes directory: %w", err)
	}
	r, err := os.OpenRoot(d.VolumesDir)
	if err != nil {
		return fmt.Errorf("volumes directory: %w", err)
	}
	defer r.Close()
	for _, n := range names {
		err := r.Mkdir(n, 0o755)
		switch {
		case err == nil:
			if err := r.Lchown(n, uid, gid); err != nil {
				return fmt.Errorf("volume %s: %w", n, err)
			}
			if err := r.Chmod(n, 0o755); err != nil {
				return fmt.Errorf("volume %s: %w", n, err)
			}
		case errors.Is(err, fs.ErrExist):
			fi, err := r.Lstat(n)
			if err != nil {
				return fmt.Errorf("volume %s: %w", n, err)
			}
			if !fi.IsDir() {
				return fmt.Errorf("%w: volume %s: %s is not a directory", driver.ErrExec, n, filepath.Join(d.VolumesDir, n))
			}
		default:
			return fmt.Errorf("volume %s: %w", n, err)
		}
	}
	return nil
}

// Volumes lists the full names of project's named volumes
// (driver.VolumeRemover).
func (d *Driver) Volumes(project string) ([]string, error) {
	if d.VolumesDir == "" || !spec.ValidProject(project) {
		return nil, nil
	}
	entries, err := os.ReadDir(d.VolumesDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("volumes directory: %w", err)
	}
	var names []string
	for _, e := range entries {
		if p, n := spec.SplitName(e.Name()); p == project && n != "" {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

// RemoveVolumes removes the named volumes of project (driver.VolumeRemover)
// and returns their full names. A volume that a container of the
// namespace still mounts is kept, with an error wrapping
// errdefs.ErrConflict; while containerd does not answer, whether one does
// cannot be told, and every volume is kept.
func (d *Driver) RemoveVolumes(ctx context.Context, project string) ([]string, error) {
	names, err := d.Volumes(project)
	if err != nil || len(names) == 0 {
		return nil, err
	}
	// No container of this driver is made with one of them meanwhile.
	d.volMu.Lock()
	defer d.volMu.Unlock()
	mounted, err := d.mountedVolumes(ctx)
	if err != nil {
		return nil, fmt.Errorf("the volumes of project %s are kept: %w", project, err)
	}
	r, err := os.OpenRoot(d.VolumesDir)
	if err != nil {
		return nil, fmt.Errorf("volumes directory: %w", err)
	}
	defer r.Close()
	var removed []string
	var errs []error
	for _, n := range names {
		if ctr, ok := mounted[n]; ok {
			errs = append(errs, fmt.Errorf("%w: volume %s is kept: container %s mounts it", errdefs.ErrConflict, n, ctr))
			continue
		}
		if err := r.RemoveAll(n); err != nil {
			errs = append(errs, fmt.Errorf("volume %s: %w", n, err))
			continue
		}
		removed = append(removed, n)
	}
	return removed, errors.Join(errs...)
}

// mountedVolumes maps each named volume some container of the namespace
// mounts to one such container's id.
func (d *Driver) mountedVolumes(ctx context.Context) (map[string]string, error) {
	c, err := d.conn()
	if err != nil {
		return nil, err
	}
	ctx = d.ctx(ctx)
	ctrs, err := c.Containers(ctx)
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	out := map[string]string{}
	for _, ctr := range ctrs {
		s, err := ctr.Spec(ctx)
		if cerrdefs.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("container %s: %w", ctr.ID(), err)
		}
		for _, m := range s.Mounts {
			if filepath.Dir(m.Source) == d.VolumesDir {
				out[filepath.Base(m.Source)] = ctr.ID()
			}
		}
	}
	return out, nil
}
