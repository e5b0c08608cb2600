// Package authz decides who may do what to a document: one decision for
// the caller (a peer of the socket, confined to its own lane or not; or a
// file of the workloads directory), the operation and the document (its
// kind, who applied it, which file owns it). The API, the supervisor and
// the documents ask it, so that a rule lives in one place and reads the
// same on either side of the socket; who asks travels below the API in the
// request's context (WithCaller), where the API's server puts it.
//
// It is not the socket's admission (which peers may connect at all, the
// API's PeerPolicy), nor what a spec of a confined caller may say (the
// API's spec policy, --peer-users), nor the share of networks and ports a
// confined caller may hold, which depends on what runs (the supervisor's
// lanes). It keeps no state: every fact comes with the question.
package authz

import (
	"fmt"

	"github.com/flyd-dev/flyd/errdefs"
)

// Caller is who asks.
type Caller struct {
	// UID is the peer's uid; 0 for root and for the daemon's own commands.
	UID uint32
	// Confined holds a caller other than root to its own lane, under
	// --peer-users: it acts only on the workloads it applied, and changes
	// no network or policy document.
	Confined bool
	// File is the file of the workloads directory the caller speaks for;
	// "" for the API. A document a file owns changes only through it.
	File string
	// Force lets the API change a workload a file owns. Documents of
	// other kinds are not forced.
	Force bool
}

// Op is what a caller asks to do to a document.
type Op int

const (
	// Read is a look: listing, getting, reading a log.
	Read Op = iota
	// Act is a command to a workload's runs: start, stop, restart,
	// signal, reload. It leaves the document as it is.
	Act
	// Apply creates or replaces the document.
	Apply
	// Remove deletes it.
	Remove
)

// Doc is the document acted on.
type Doc struct {
	// Kind is the document's kind (spec.KindNetwork, …); "" for a
	// workload.
	Kind string
	Name string
	// Exists says whether a document of that name is there; a new one
	// has no applier nor owner yet.
	Exists bool
	// AppliedBy is the uid of the caller that applied a workload.
	AppliedBy uint32
	// Owner is the file of the workloads directory that owns it; "" when
	// it was made through the API.
	Owner string
}

// Decide refuses c doing op to d, or says nil. A refusal wraps
// errdefs.ErrForbidden (a confined caller out of its lane) or
// errdefs.ErrConflict (a document another owns, which forcing or its file
// may change).
func Decide(c Caller, op Op, d Doc) error {
	if d.Kind == "" {
		return decideWorkload(c, op, d)
	}
	return decideDocument(c, op, d)
}

// decideWorkload: a workload a file owns changes through that file, or by
// force; a confined caller touches only the workloads it applied, even to
// look.
func decideWorkload(c Caller, op Op, d Doc) error {
	if !d.Exists {
		return nil
	}
	if (op == Apply || op == Remove) && d.Owner != c.File && !c.Force {
		if d.Owner == "" {
			return fmt.Errorf("%w: workload %s was created through the API, not by %s", errdefs.ErrConflict, d.Name, c.File)
		}
		return fmt.Errorf("%w: workload %s belongs to %s in the workloads directory; change that file, or force", errdefs.ErrConflict, d.Name, d.Owner)
	}
	if c.Confined && d.AppliedBy != c.UID {
		return fmt.Errorf("%w: workload %s was applied by uid %d: a caller other than root acts only on the workloads it applied", errdefs.ErrForbidden, d.Name, d.AppliedBy)
	}
	return nil
}

// decideDocument: a confined caller changes no document other than its
// workloads (a network, a policy or a workspace changes what other
// workloads reach or are given, not only its own); a document a file owns changes only through that file,
// and one made through the API not through a file.
func decideDocument(c Caller, op Op, d Doc) error {
	if op == Read || op == Act {
		return nil
	}
	if c.Confined {
		return &Refusal{Field: "kind", Msg: fmt.Sprintf("%s %s: %s documents are root's while --peer-users limits callers", d.Kind, d.Name, d.Kind)}
	}
	switch {
	case d.Owner == c.File:
		return nil
	case d.Owner != "":
		return fmt.Errorf("%w: %s %s belongs to %s in the workloads directory; change that file", errdefs.ErrConflict, d.Kind, d.Name, d.Owner)
	case d.Exists:
		return fmt.Errorf("%w: %s %s was made through the API, not by %s", errdefs.ErrConflict, d.Kind, d.Name, c.File)
	}
	return nil
}

// Refusal is a refusal that names the field of the document it refuses,
// as the API reports a spec policy's. It is errdefs.ErrForbidden.
type Refusal struct {
	Field string
	Msg   string
}

func (r *Refusal) Error() string { return r.Field + ": " + r.Msg }

// Unwrap makes a Refusal errdefs.ErrForbidden.
func (r *Refusal) Unwrap() error { return errdefs.ErrForbidden }
