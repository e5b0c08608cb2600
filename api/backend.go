package api

import (
	"context"
	"io"
	"syscall"

	"github.com/flyd-dev/flyd/spec"
)

// Backend is what the daemon offers. The supervisor implements it in-process
// and Client implements it over the socket.
type Backend interface {
	Status(ctx context.Context) (*Status, error)
	List(ctx context.Context) ([]Workload, error)
	Get(ctx context.Context, name string) (*Workload, error)
	// Put creates or replaces a workload. Replacing with an equal spec
	// changes nothing. With start, Put returns after the first start attempt,
	// with its outcome in the returned state.
	Put(ctx context.Context, w *spec.Workload, start bool) (*Workload, error)
	Start(ctx context.Context, name string) (*Workload, error)
	Stop(ctx context.Context, name string) (*Workload, error)
	Restart(ctx context.Context, name string) (*Workload, error)
	Signal(ctx context.Context, name string, sig syscall.Signal) error
	Delete(ctx context.Context, name string) error
	// Logs writes the last tail lines (the whole current file when tail < 0,
	// nothing when 0) and, with follow,
	// what is appended until ctx is done.
	Logs(ctx context.Context, name string, w io.Writer, tail int, follow bool) error
	// Ports lists every endpoint's allocation as a network mapping.
	Ports(ctx context.Context) ([]PortMapping, error)
	// Networks lists the isolated networks; DeleteNetwork deletes one no
	// workload uses.
	Networks(ctx context.Context) ([]Network, error)
	DeleteNetwork(ctx context.Context, name string) error
	// Events streams events until ctx is done. The channel is closed when
	// the stream ends, including when a reader too slow to keep up is dropped.
	Events(ctx context.Context) (<-chan Event, error)
}
