package api

import "time"

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

// LeaseOptions qualify Hold and Lease: a project bound to its client is
// taken down by the daemon once the client is gone.
type LeaseOptions struct {
	// Grace is how long a held project outlives its client's last
	// connection: the time a client has to come back (across a daemon
	// restart, say). Zero: the daemon's default, 10 s.
	Grace time.Duration
	// TTL, for Lease, binds the project until that long from now; a
	// Lease with none ends the binding, the project left up.
	TTL time.Duration
	// Volumes: the project's named volumes go with it.
	Volumes bool
}

// Lease is a project bound to a client, as the daemon keeps it.
type Lease struct {
	Project string `json:"project"`
	UID     uint32 `json:"uid"`
	// Held: a client holds it now. Else Due is when the project goes.
	Held    bool      `json:"held"`
	Holders int       `json:"holders,omitempty"`
	Due     time.Time `json:"due,omitzero"`
	Timed   bool      `json:"timed,omitempty"`
	// Error is why the last down of the lapsed lease failed.
	Error string `json:"error,omitempty"`
}
