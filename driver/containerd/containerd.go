// Package containerd runs kind containerd workloads as containerd tasks.
//
// Images come from containerd's image store in the driver's namespace, or
// are imported once from an OCI/Docker archive (spec containerd.archive)
// and unpacked for the overlayfs snapshotter (native when overlayfs fails).
//
// Every container is named <workload>-<8 hex> and labelled
// flyd.workload=<workload>, so that Sweep can find what a dead daemon left.
// The task's stdout and stderr go to the task's log file through
// cio.LogFile: the shim writes the file, so output keeps flowing while
// the daemon restarts.
//
// File carriers. Values too large for the environment are written into the
// container's own writable snapshot before the task is created: the
// snapshot is mounted on a temporary directory, /codefly/configuration is
// created there (0500, owned by the container user resolved from the
// image's /etc/passwd and /etc/group), one 0400 file per value, owned by
// the same user, and the snapshot is unmounted. All writes go through an
// os.Root so a symlink in the image cannot redirect them onto the host.
// On the host the values live only in containerd's snapshot directory,
// which only root can read, and they disappear with the snapshot when the
// run ends (or when Sweep removes it).
//
// Every container gets an /etc/hosts of flyd's, written into its snapshot
// the same way: localhost, and host.docker.internal, the host side of
// its network's link (127.0.0.1 on the host's network, after the host's
// own entries), the name codefly's container addresses use for the host.
//
// Volumes (spec containerd.volumes) are bind mounts: a host path as it
// is, or a named volume, a directory of VolumesDir kept for the
// workload's project across runs until RemoveVolumes (volumes.go).
//
// This package imports the containerd client (a heavy dependency); keep it
// out of packages that do not need it.
package containerd

import (
	"context"
	"crypto/rand"
	_ "crypto/sha256" // go-digest needs a registered sha256
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/containerd/v2/pkg/oci"
	cerrdefs "github.com/containerd/errdefs"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/flyd-dev/flyd/carriers"
	"github.com/flyd-dev/flyd/driver"
	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/spec"
)

const (
	// LabelWorkload names the workload a container belongs to.
	LabelWorkload = "flyd.workload"
	// ConfigurationDir is where file carriers appear inside a container.
	ConfigurationDir = spec.CarrierDir
	// DefaultNamespace is the containerd namespace flyd uses.
	DefaultNamespace = "flyd"
	// DefaultSocket is containerd's usual socket.
	DefaultSocket = "/run/containerd/containerd.sock"

	cleanupTimeout = 30 * time.Second
)

// Driver is the containerd runtime. Use it by pointer.
type Driver struct {
	Socket    string // containerd's socket
	Namespace string // default "flyd"
	// VolumesDir holds the named volumes (volumes.go); without it a
	// workload with a named volume cannot start.
	VolumesDir string

	// volMu guards no field: a start with named volumes holds it shared
	// from its container's making until its volumes are made, and
	// RemoveVolumes exclusive, so that no volume is removed under a
	// container made meanwhile. mu may be taken while it is held.
	volMu sync.RWMutex

	// mu guards client and snapshotter, and is held while connecting.
	mu          sync.Mutex
	client      *containerd.Client
	snapshotter string // chosen on first unpack
	// importMu guards imported, the archive identities already imported,
	// and is held through an import, so that an archive is imported once;
	// it is never held with mu or volMu.
	imported map[string]bool
	importMu sync.Mutex
	// callerOf says who applied a workload, for its pull's credentials
	// (credentials.go).
	callerOf atomic.Pointer[func(workload string) (uint32, bool)]
}

// New returns a driver for the containerd at socket ("" = DefaultSocket),
// using namespace ("" = "flyd"). It connects lazily.
func New(socket, namespace string) *Driver {
	if socket == "" {
		socket = DefaultSocket
	}
	if namespace == "" {
		namespace = DefaultNamespace
	}
	return &Driver{Socket: socket, Namespace: namespace}
}

var _ driver.VolumeRemover = (*Driver)(nil)

// Kind reports spec.KindContainerd.
func (d *Driver) Kind() spec.Kind { return spec.KindContainerd }

// Capabilities: a container, codefly's container port mode, its user the
// image's.
func (d *Driver) Capabilities() driver.Capabilities {
	return driver.Capabilities{RuntimeContext: "container", ContainerPorts: true, ImageUser: true}
}

// WritesLogFile: the shim writes the log file by its path (driver.FileLogs).
func (d *Driver) WritesLogFile() {}

func (d *Driver) ns() string {
	if d.Namespace == "" {
		return DefaultNamespace
	}
	return d.Namespace
}

func (d *Driver) ctx(ctx context.Context) context.Context {
	return namespaces.WithNamespace(ctx, d.ns())
}

// cleanupCtx is never cancelled by the caller's cancellation: cleanup must
// happen even when the start was abandoned.
func (d *Driver) cleanupCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(d.ctx(context.WithoutCancel(ctx)), cleanupTimeout)
}

func (d *Driver) conn() (*containerd.Client, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.client != nil {
		return d.client, nil
	}
	sock := d.Socket
	if sock == "" {
		sock = DefaultSocket
	}
	if _, err := os.Stat(sock); err != nil {
		return nil, fmt.Errorf("%w: containerd socket %s: %v", errdefs.ErrRuntimeUnavailable, sock, err)
	}
	c, err := containerd.New(sock, containerd.WithDefaultNamespace(d.ns()), containerd.WithTimeout(5*time.Second))
	if err != nil {
		return nil, fmt.Errorf("%w: containerd at %s: %v", errdefs.ErrRuntimeUnavailable, sock, err)
	}
	d.client = c
	return c, nil
}

// Available reports whether containerd answers on the socket; the error
// wraps errdefs.ErrRuntimeUnavailable when it does not.
func (d *Driver) Available(ctx context.Context) error {
	c, err := d.conn()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if _, err := c.Version(d.ctx(ctx)); err != nil {
		return fmt.Errorf("%w: containerd at %s does not answer: %v", errdefs.ErrRuntimeUnavailable, d.Socket, err)
	}
	return nil
}

// Close closes the connection to containerd; running tasks are untouched.
func (d *Driver) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.client == nil {
		return nil
	}
	err := d.client.Close()
	d.client = nil
	return err
}

func containerID(workload string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return workload + "-" + hex.EncodeToString(b)
}

// Start imports/unpacks the image, creates the container and its task, and
// starts it. On any failure everything created is removed.
func (d *Driver) Start(ctx context.Context, t *driver.Task) (_ driver.Process, retErr error) {
	if t.Spec == nil || t.Spec.Containerd == nil || t.Spec.Containerd.Image == "" {
		return nil, fmt.Errorf("%w: workload has no containerd image", driver.ErrExec)
	}
	c, err := d.conn()
	if err != nil {
		return nil, err
	}
	ctx = d.ctx(ctx)
	img, sn, err := d.image(ctx, c, t)
	if err != nil {
		return nil, err
	}

	mounts, named, err := d.volumeMounts(t)
	if err != nil {
		return nil, err
	}
	if t.Mounts.Hosts != "" {
		// Its network's /etc/hosts (package mounts), which names the
		// network's workloads, bound read-only over the one written into
		// its root; a volume at /etc/hosts comes after it, and wins.
		mounts = append([]specs.Mount{{Destination: "/etc/hosts", Type: "bind", Source: t.Mounts.Hosts,
			Options: []string{"rbind", "rprivate", "ro"}}}, mounts...)
	}
	hosts, err := hostsFile(t.Network)
	if err != nil {
		return nil, fmt.Errorf("%w: /etc/hosts: %v", driver.ErrExec, err)
	}

	id := containerID(t.Workload)
	env := append([]string(nil), t.Env...)
	env = append(env, carriers.Pointers(ConfigurationDir, t.Files)...)
	opts := []oci.SpecOpts{oci.WithImageConfig(img)}
	if len(t.Args) > 0 {
		opts = append(opts, oci.WithProcessArgs(t.Args...))
	}
	opts = append(opts, oci.WithEnv(env))
	if t.Spec.Workdir != "" {
		opts = append(opts, oci.WithProcessCwd(t.Spec.Workdir))
	}
	if t.Spec.User != "" {
		opts = append(opts, oci.WithUser(t.Spec.User), oci.WithAdditionalGIDs(t.Spec.User))
	}
	// /etc/hosts is written into the container's root (prepareRootfs),
	// and in an isolated network its network's is bound over it.
	if t.Network == nil {
		opts = append(opts, oci.WithHostNamespace(specs.NetworkNamespace), oci.WithHostResolvconf)
	} else {
		opts = append(opts, oci.WithLinuxNamespace(specs.LinuxNamespace{Type: specs.NetworkNamespace, Path: t.Network.Path}))
	}
	if t.Cgroup != nil {
		opts = append(opts, oci.WithCgroup(t.Cgroup.CgroupsPath()))
	} else {
		opts = append(opts, resourceOpts(t.Limits)...)
	}
	if len(mounts) > 0 {
		opts = append(opts, oci.WithMounts(mounts))
	}
	if len(named) > 0 {
		// RemoveVolumes sees this container, or runs before it is made
		// and before its volumes are.
		d.volMu.RLock()
		defer d.volMu.RUnlock()
	}

	ctr, err := c.NewContainer(ctx, id,
		containerd.WithContainerLabels(map[string]string{LabelWorkload: t.Workload}),
		containerd.WithSnapshotter(sn),
		containerd.WithImage(img),
		containerd.WithNewSnapshot(id, img),
		containerd.WithNewSpec(opts...),
	)
	if err != nil {
		// A partial container can leave its snapshot behind.
		cctx, cancel := d.cleanupCtx(ctx)
		_ = c.SnapshotService(sn).Remove(cctx, id)
		cancel()
		if strings.Contains(err.Error(), "no users found") || strings.Contains(err.Error(), "no groups found") {
			return nil, fmt.Errorf("%w: user %q: %v", driver.ErrExec, t.Spec.User, err)
		}
		return nil, fmt.Errorf("create container: %w", err)
	}
	var task containerd.Task
	defer func() {
		if retErr != nil {
			d.remove(ctx, ctr, task)
		}
	}()

	s, err := ctr.Spec(ctx)
	if err != nil {
		return nil, fmt.Errorf("container spec: %w", err)
	}
	uid, gid := int(s.Process.User.UID), int(s.Process.User.GID)
	if len(named) > 0 {
		if err := d.ensureVolumes(named, uid, gid); err != nil {
			return nil, err
		}
	}
	if err := d.prepareRootfs(ctx, c, ctr, uid, gid, hosts, t.Files); err != nil {
		return nil, err
	}

	ioc := cio.NullIO
	if t.Log != nil {
		ioc = cio.LogFile(t.Log.Name())
	}
	task, err = ctr.NewTask(ctx, ioc)
	if err != nil {
		return nil, fmt.Errorf("%w: create task: %v", driver.ErrExec, err)
	}
	// Wait before Start, on a context that outlives the caller's.
	wctx, wcancel := context.WithCancel(d.ctx(context.WithoutCancel(ctx)))
	exitCh, err := task.Wait(wctx)
	if err != nil {
		wcancel()
		return nil, fmt.Errorf("wait task: %w", err)
	}
	if err := task.Start(ctx); err != nil {
		wcancel()
		return nil, fmt.Errorf("%w: start task: %v", driver.ErrExec, err)
	}
	// The container's id is all it takes to find the run again; it
	// keeps no state of its own beyond it (version 1, no data).
	st := driver.State{
		Driver:    spec.KindContainerd,
		ID:        id,
		PID:       int(task.Pid()),
		StartedAt: time.Now(),
		Version:   1,
	}
	return d.watch(ctr, task, exitCh, wctx, wcancel, st), nil
}

// remove kills and deletes task, container and snapshot, ignoring what is
// already gone, with a context the caller cannot cancel.
func (d *Driver) remove(ctx context.Context, ctr containerd.Container, task containerd.Task) error {
	return d.removeTask(ctx, ctr, task, containerd.WithProcessKill)
}

// removeEnded is remove for a task whose exit was seen: there is nothing
// to kill, and the kill's two round trips (a wait and a kill that fails)
// are a third of a stop's.
func (d *Driver) removeEnded(ctx context.Context, ctr containerd.Container, task containerd.Task) error {
	return d.removeTask(ctx, ctr, task)
}

func (d *Driver) removeTask(ctx context.Context, ctr containerd.Container, task containerd.Task, opts ...containerd.ProcessDeleteOpts) error {
	cctx, cancel := d.cleanupCtx(ctx)
	defer cancel()
	var errs []error
	if task == nil {
		if t, err := ctr.Task(cctx, nil); err == nil {
			task = t
		}
	}
	if task != nil {
		if _, err := task.Delete(cctx, opts...); err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete task: %w", err))
		}
	}
	if err := ctr.Delete(cctx, containerd.WithSnapshotCleanup); err != nil && !cerrdefs.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("delete container: %w", err))
	}
	return errors.Join(errs...)
}

// Recover reattaches to the container named by s.ID (container_id in
// version 0, which UnmarshalJSON reads into ID). A container
// whose task is already gone is deleted and reported as errdefs.ErrNotFound;
// a task that stopped while no daemon watched reports its real exit.
func (d *Driver) Recover(ctx context.Context, s driver.State) (driver.Process, error) {
	if s.ID == "" {
		return nil, fmt.Errorf("%w: no container id to recover", errdefs.ErrNotFound)
	}
	c, err := d.conn()
	if err != nil {
		return nil, err
	}
	ctx = d.ctx(ctx)
	ctr, err := c.LoadContainer(ctx, s.ID)
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return nil, fmt.Errorf("%w: container %s", errdefs.ErrNotFound, s.ID)
		}
		return nil, fmt.Errorf("load container %s: %w", s.ID, err)
	}
	task, err := ctr.Task(ctx, nil)
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			_ = d.remove(ctx, ctr, nil)
			return nil, fmt.Errorf("%w: container %s has no task", errdefs.ErrNotFound, s.ID)
		}
		return nil, fmt.Errorf("load task of %s: %w", s.ID, err)
	}
	wctx, wcancel := context.WithCancel(d.ctx(context.WithoutCancel(ctx)))
	exitCh, err := task.Wait(wctx)
	if err != nil {
		wcancel()
		return nil, fmt.Errorf("wait task of %s: %w", s.ID, err)
	}
	st := s
	st.Driver = spec.KindContainerd
	st.PID = int(task.Pid())
	return d.watch(ctr, task, exitCh, wctx, wcancel, st), nil
}

// Sweep deletes every container of the namespace labelled with a workload
// not in keep, with its task and snapshot; containers without the label
// are not flyd's and are left alone.
func (d *Driver) Sweep(ctx context.Context, keep map[string]bool) error {
	c, err := d.conn()
	if err != nil {
		return err
	}
	ctx = d.ctx(ctx)
	ctrs, err := c.Containers(ctx, fmt.Sprintf("labels.%q", LabelWorkload))
	if err != nil {
		return fmt.Errorf("list containers: %w", err)
	}
	var errs []error
	for _, ctr := range ctrs {
		labels, err := ctr.Labels(ctx)
		if err != nil {
			if !cerrdefs.IsNotFound(err) {
				errs = append(errs, err)
			}
			continue
		}
		name, ok := labels[LabelWorkload]
		if !ok || keep[name] {
			continue
		}
		if err := d.remove(ctx, ctr, nil); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", ctr.ID(), err))
		}
	}
	return errors.Join(errs...)
}
