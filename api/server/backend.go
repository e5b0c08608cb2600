package server

import (
	"context"
	"syscall"

	"github.com/flyd-dev/flyd/api"
	"github.com/flyd-dev/flyd/spec"
)

// Backend is what the daemon offers. daemon.Backend implements it in-process
// and api.Client implements it over the socket.
type Backend interface {
	Status(ctx context.Context) (*api.Status, error)
	List(ctx context.Context) ([]api.Workload, error)
	Get(ctx context.Context, name string) (*api.Workload, error)
	// Apply creates or replaces a workload. Replacing with an equal spec
	// changes nothing. With Start, it returns after the first start
	// attempt, with its outcome in the returned state.
	Apply(ctx context.Context, w *spec.Workload, o api.ApplyOptions) (*api.Workload, error)
	// ApplyBatch applies specs as one batch: a name twice or an `after`
	// cycle refuses all of it; else dependencies first, one Result each.
	ApplyBatch(ctx context.Context, specs []*spec.Workload, o api.ApplyOptions) ([]api.Result, error)
	// Up makes a project what docs say, removing what it has beyond them;
	// Down removes all of it. Both say what they did, and what failed.
	Up(ctx context.Context, project string, docs api.Documents, o api.ApplyOptions) (*api.ProjectChange, error)
	Down(ctx context.Context, project string, o api.RemoveOptions) (*api.ProjectChange, error)
	// Hold binds a project to the caller until release, and the lease's
	// grace after: then the daemon takes the project down. Lease binds it
	// until a time (o.TTL), or without one unbinds it. Leases lists the
	// bindings; DownStale takes down now the projects whose client is gone.
	Hold(ctx context.Context, project string, o api.LeaseOptions) (release func(), err error)
	Lease(ctx context.Context, project string, o api.LeaseOptions) error
	Leases(ctx context.Context) ([]api.Lease, error)
	DownStale(ctx context.Context) (map[string]*api.ProjectChange, error)
	// Batch runs one action on many workloads in parallel, one Result each.
	Batch(ctx context.Context, action api.Action, bt api.Batch) ([]api.Result, error)
	Start(ctx context.Context, name string) (*api.Workload, error)
	Stop(ctx context.Context, name string) (*api.Workload, error)
	// Kill stops a workload at once, without a grace period, overtaking
	// a stop in progress.
	Kill(ctx context.Context, name string) (*api.Workload, error)
	Restart(ctx context.Context, name string) (*api.Workload, error)
	// Scale applies a workload, or a group of replicas, again with that
	// many replicas; it answers with the first replica's state.
	Scale(ctx context.Context, name string, replicas int, o api.ApplyOptions) (*api.Workload, error)
	Signal(ctx context.Context, name string, sig syscall.Signal) error
	// Remove stops and removes a workload.
	Remove(ctx context.Context, name string, o api.RemoveOptions) error
	// Logs gives out the records of a workload's log that q selects and,
	// following, what is written next until ctx is done.
	Logs(ctx context.Context, name string, q api.LogQuery, out api.LogSink) error
	// Ports lists every endpoint's allocation as a network mapping.
	Ports(ctx context.Context) ([]api.PortMapping, error)
	// Documents lists the documents of a kind of spec.DocKinds as the
	// kind shows them: a JSON array of objects, each with its "name"
	// (networks with their namespaces, policies with what each is in force
	// for, workspaces with their secrets redacted).
	Documents(ctx context.Context, kind string) (any, error)
	// PutDocument records a document and puts it in force before
	// answering with what its kind shows of it.
	PutDocument(ctx context.Context, doc spec.Document) (any, error)
	// DeleteDocument removes a document of a kind, and what it made (a
	// network no workload uses).
	DeleteDocument(ctx context.Context, kind, name string) error
	// Stats samples the running workloads' usage, at most once an
	// interval (the sample says which).
	Stats(ctx context.Context) (*api.Stats, error)
	// Events streams events until ctx is done. The channel is closed when
	// the stream ends, including when a reader too slow to keep up is dropped.
	// With after > 0 it first replays the kept events numbered after it.
	Events(ctx context.Context, after uint64) (<-chan api.Event, error)
}
