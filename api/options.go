package api

// ApplyOptions qualify Apply. Force changes a workload a file of the
// workloads directory owns. Who applies it is the request's caller
// (authz.CallerOf).
type ApplyOptions struct {
	Start bool
	Force bool
}

// RemoveOptions qualify Remove, as ApplyOptions do Apply.
type RemoveOptions struct {
	Force bool
	// Volumes: a project's Down removes its named volumes too.
	Volumes bool
}

// MaxBodyBytes caps request bodies; MaxProjectBytes a project's (flyd up),
// which holds all of its documents in one request, as its prune needs, and
// cannot be split as a batch is. The server reads both once an apply is
// admitted, a few at a time; the client splits a batch by the first.
const (
	MaxBodyBytes    = 1 << 20
	MaxProjectBytes = 16 << 20
)
