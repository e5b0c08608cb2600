package daemon

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/api"
	"github.com/flyd-dev/flyd/api/server"
	"github.com/flyd-dev/flyd/authz"
	"github.com/flyd-dev/flyd/declarative"
	"github.com/flyd-dev/flyd/documents"
	"github.com/flyd-dev/flyd/driver"
	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/events"
	"github.com/flyd-dev/flyd/logfile"
	"github.com/flyd-dev/flyd/netplane"
	"github.com/flyd-dev/flyd/project"
	"github.com/flyd-dev/flyd/registrar"
	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/status"
	"github.com/flyd-dev/flyd/supervisor"
	"github.com/flyd-dev/flyd/usage"
)

// Backend is the supervisor and the documents as the API serves them
// (server.Backend): it turns the API's requests into the supervisor's
// commands and the documents' and their answers into the wire's types, and
// ups and downs into its projects'. It decides nothing: who may do what is
// the API server's (api/caller.go) and authz's, what happens the
// supervisor's and the documents'.
type Backend struct {
	s      *supervisor.Supervisor
	docs   *documents.Documents
	p      *project.Projects
	leases *project.Leases
	parts  Parts
}

// Parts are what a Backend serves beside the supervisor and the
// documents: the parts of the daemon the supervisor is built over, and the
// daemon's own facts, for its status, its events, the reach and a down's
// volumes.
type Parts struct {
	Version string
	Started time.Time
	// Events is the daemon's event bus: the stream, and the number of the
	// last event for the status.
	Events *events.Bus
	// Runtimes say which kinds can run now, and keep named volumes.
	Runtimes driver.Runtimes
	// Usage samples the running workloads' usage, for `flyd top`.
	Usage *usage.Sampler
	// Plane projects the reach.
	Plane *netplane.Plane
	// Files is the workloads directory's watcher, with its files' problems;
	// nil when no directory is watched.
	Files *declarative.Watcher
	// Registrar heart-beats into the registry at RegistryURL with the key
	// of RegistryKeyFile; nil when the registry is off.
	Registrar                    *registrar.Registrar
	RegistryURL, RegistryKeyFile string
	// Leases keeps the projects bound to their clients (the records);
	// nil: no project is bound, and a hold is refused.
	Leases project.LeaseStore
	// Publish tells the events of the parts beside the supervisor.
	Publish func(status.Event)
	Log     *zap.Logger
}

// NewBackend serves s and docs, and their projects, over parts.
// Made once the supervisor has adopted the runs of an earlier daemon: the
// leases it arms take down only projects whose workloads are known.
func NewBackend(s *supervisor.Supervisor, docs *documents.Documents, parts Parts) *Backend {
	b := &Backend{s: s, docs: docs, p: project.New(s, docs, parts.Runtimes), parts: parts}
	if parts.Leases != nil {
		b.leases = b.p.OpenLeases(parts.Leases, parts.Publish, parts.Log.Named("leases"))
	}
	return b
}

// Close disarms the leases: the daemon is stopping, and a client's hold
// cut by it is no client gone.
func (b *Backend) Close() {
	if b.leases != nil {
		b.leases.Close()
	}
}

var _ server.Backend = (*Backend)(nil)

// Status is the daemon's: the supervisor's workloads and quarantine, with
// the daemon's version and start, which runtimes can run now, the
// registrar's numbers, the last event's and the workloads directory's file
// problems.
func (b *Backend) Status(ctx context.Context) (*api.Status, error) {
	st := b.s.Status(ctx)
	st.Version, st.PID, st.StartedAt = b.parts.Version, os.Getpid(), b.parts.Started
	st.Runtimes = b.parts.Runtimes.Availability(ctx)
	st.Registry = b.parts.Registrar.Status(b.parts.RegistryURL, b.parts.RegistryKeyFile)
	st.LastEvent = b.parts.Events.Last()
	st.FileProblems = b.parts.Files.FileProblems()
	if b.parts.Plane != nil {
		st.PublishedPorts = b.parts.Plane.PublishedPath()
	}
	return api.FromDaemon(st), nil
}

func (b *Backend) List(ctx context.Context) ([]api.Workload, error) {
	ws := b.s.List(ctx)
	out := make([]api.Workload, len(ws))
	for i, w := range ws {
		out[i] = api.FromWorkload(w)
	}
	return out, nil
}

func (b *Backend) Get(ctx context.Context, name string) (*api.Workload, error) {
	return workload(b.s.Get(ctx, name))
}

func (b *Backend) Apply(ctx context.Context, w *spec.Workload, o api.ApplyOptions) (*api.Workload, error) {
	return workload(b.s.Apply(ctx, w, applyOptions(ctx, o)))
}

func (b *Backend) ApplyBatch(ctx context.Context, specs []*spec.Workload, o api.ApplyOptions) ([]api.Result, error) {
	changes := make([]supervisor.Change, len(specs))
	for i, sp := range specs {
		changes[i] = supervisor.Change{Spec: sp, Options: applyOptions(ctx, o)}
	}
	return results(b.s.ApplyAll(ctx, changes))
}

func (b *Backend) Up(ctx context.Context, name string, docs api.Documents, o api.ApplyOptions) (*api.ProjectChange, error) {
	return change(b.p.Up(ctx, name, project.Documents{Workloads: docs.Workloads, Docs: docs.Docs, Keep: docs.Keep}, applyOptions(ctx, o)))
}

func (b *Backend) Down(ctx context.Context, name string, o api.RemoveOptions) (*api.ProjectChange, error) {
	c := authz.CallerOf(ctx)
	return change(b.p.Down(ctx, name, supervisor.RemoveOptions{Force: o.Force, By: c.UID, Confined: c.Confined, Volumes: o.Volumes}))
}

func (b *Backend) Hold(ctx context.Context, name string, o api.LeaseOptions) (func(), error) {
	if b.leases == nil {
		return nil, errNoLeases
	}
	return b.leases.Hold(ctx, name, leaseOptions(o))
}

func (b *Backend) Lease(ctx context.Context, name string, o api.LeaseOptions) error {
	if b.leases == nil {
		return errNoLeases
	}
	return b.leases.Renew(ctx, name, leaseOptions(o))
}

func (b *Backend) Leases(ctx context.Context) ([]api.Lease, error) {
	out := []api.Lease{}
	if b.leases == nil {
		return out, nil
	}
	for _, l := range b.leases.List(ctx) {
		out = append(out, api.Lease{Project: l.Project, UID: l.UID, Held: l.Held, Holders: l.Holders, Due: l.Due, Timed: l.Timed, Error: l.Error})
	}
	return out, nil
}

func (b *Backend) DownStale(ctx context.Context) (map[string]*api.ProjectChange, error) {
	out := map[string]*api.ProjectChange{}
	if b.leases == nil {
		return out, nil
	}
	chs, err := b.leases.Stale(ctx)
	for name, c := range chs {
		out[name], _ = change(c, nil)
	}
	return out, err
}

var errNoLeases = fmt.Errorf("%w: this daemon binds no project to its client", errdefs.ErrUnavailable)

func leaseOptions(o api.LeaseOptions) project.LeaseOptions {
	return project.LeaseOptions{Grace: o.Grace, TTL: o.TTL, Volumes: o.Volumes}
}

// change is a project's change as the wire carries it.
func change(c *project.Change, err error) (*api.ProjectChange, error) {
	if c == nil {
		return nil, err
	}
	applied, _ := results(c.Applied, nil)
	removed, _ := results(c.Removed, nil)
	return &api.ProjectChange{Applied: applied, Removed: removed, Docs: c.Docs, Volumes: c.Volumes}, err
}

func (b *Backend) Batch(ctx context.Context, action api.Action, bt api.Batch) ([]api.Result, error) {
	return results(b.s.Batch(ctx, supervisor.Action(action),
		supervisor.BatchRequest{Names: bt.Names, All: bt.All, InProject: bt.InProject, Project: bt.Project, Force: bt.Force, Signal: bt.Signal, Parallel: bt.Parallel}))
}

func (b *Backend) Start(ctx context.Context, name string) (*api.Workload, error) {
	return workload(b.s.Start(ctx, name))
}

func (b *Backend) Stop(ctx context.Context, name string) (*api.Workload, error) {
	return workload(b.s.Stop(ctx, name))
}

func (b *Backend) Kill(ctx context.Context, name string) (*api.Workload, error) {
	return workload(b.s.Kill(ctx, name))
}

func (b *Backend) Restart(ctx context.Context, name string) (*api.Workload, error) {
	return workload(b.s.Restart(ctx, name))
}

func (b *Backend) Scale(ctx context.Context, name string, replicas int, o api.ApplyOptions) (*api.Workload, error) {
	return workload(b.s.Scale(ctx, name, replicas, applyOptions(ctx, o)))
}

func (b *Backend) Signal(ctx context.Context, name string, sig syscall.Signal) error {
	return b.s.Signal(ctx, name, sig)
}

func (b *Backend) Remove(ctx context.Context, name string, o api.RemoveOptions) error {
	c := authz.CallerOf(ctx)
	return b.s.Remove(ctx, name, supervisor.RemoveOptions{Force: o.Force, By: c.UID, Confined: c.Confined})
}

func (b *Backend) Logs(ctx context.Context, name string, q api.LogQuery, out api.LogSink) error {
	return b.s.Logs(ctx, name, logfile.Query{Tail: q.Tail, Since: q.Since, From: q.From, Follow: q.Follow}, logSink{out})
}

// logSink hands a log's records to the API's sink.
type logSink struct{ out api.LogSink }

func (l logSink) Record(r logfile.Record) error { return l.out.Record(api.LogRecord(r)) }
func (l logSink) Flush()                        { l.out.Flush() }

func (b *Backend) Ports(ctx context.Context) ([]api.PortMapping, error) {
	return api.FromPorts(b.s.Ports(ctx)), nil
}

func (b *Backend) Documents(ctx context.Context, kind string) (any, error) {
	return b.docs.List(ctx, kind)
}

func (b *Backend) PutDocument(ctx context.Context, doc spec.Document) (any, error) {
	return b.docs.Put(ctx, doc)
}

func (b *Backend) DeleteDocument(ctx context.Context, kind, name string) error {
	return b.docs.Delete(ctx, kind, name)
}

func (b *Backend) Stats(ctx context.Context) (*api.Stats, error) {
	out := api.FromStats(b.parts.Usage.Sample())
	return &out, nil
}

func (b *Backend) Events(ctx context.Context, after uint64) (<-chan api.Event, error) {
	in := b.parts.Events.Subscribe(ctx, after)
	out := make(chan api.Event)
	c := authz.CallerOf(ctx)
	go func() {
		defer close(out)
		for ev := range in {
			// A confined caller's lane: the events of the workloads it
			// applied, no other's, nor the documents' (root's).
			if c.Confined && (ev.Workload == "" || ev.By != c.UID) {
				continue
			}
			select {
			case out <- api.FromEvent(ev):
			case <-ctx.Done():
				for range in { // closed once ctx's unsubscribe runs
				}
				return
			}
		}
	}()
	return out, nil
}

// workload is a command's answer on the wire: its workload, when it has
// one, and its error.
func workload(v *status.Workload, err error) (*api.Workload, error) {
	if v == nil {
		return nil, err
	}
	out := api.FromWorkload(*v)
	return &out, err
}

func results(outs []supervisor.Outcome, err error) ([]api.Result, error) {
	if err != nil {
		return nil, err
	}
	rs := make([]api.Result, len(outs))
	for i, o := range outs {
		var wl *api.Workload
		if o.Workload != nil {
			w := api.FromWorkload(*o.Workload)
			wl = &w
		}
		rs[i] = api.ResultOf(o.Name, wl, o.Err)
	}
	return rs, nil
}

func applyOptions(ctx context.Context, o api.ApplyOptions) supervisor.ApplyOptions {
	c := authz.CallerOf(ctx)
	return supervisor.ApplyOptions{Start: o.Start, Force: o.Force, By: c.UID, Confined: c.Confined}
}
