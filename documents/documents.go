// Package documents keeps the documents of every kind beside workloads
// (spec.DocKinds: networks, policies, workspaces), as the API, a project's
// up and down and the workloads directory change them: who may change one
// (asked of authz, with the file that owns it), which file owns one (the
// records' owners, set before the change it goes with), the change itself
// (its kind's Keeper's) and the event that tells it. It is written once for
// every kind.
//
// It is not where a document is in force (each kind's Keeper: the network
// plane keeps the networks and the policies, workspace.Set the
// workspaces), nor what a workload is: the supervisor's, which needs
// nothing of this package.
package documents

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/authz"
	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/events"
	"github.com/flyd-dev/flyd/records"
	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/status"
)

// A document that a file of the workloads directory defines belongs to
// that file, as its workloads do: the API may not change or remove it
// (conflict), a file may not take one made through the API, and the
// directory's watcher removes it when the file stops defining it, across a
// daemon restart too (the owners are recorded).

// Keeper puts one kind of document in force: the part of the daemon that
// knows what the kind does. Names are full (PROJECT.NAME).
type Keeper interface {
	// Put puts a valid document with full names in force, and answers
	// what the API shows of it; an answer beside an error is a document
	// put in force in part.
	Put(ctx context.Context, doc spec.Document) (any, error)
	// Delete removes a document made through the API or a project, and
	// what it made; one that is not there is errdefs.ErrNotFound.
	Delete(ctx context.Context, name string) error
	// Forget drops a document its file no longer defines; what it made
	// may stay (a network keeps its workloads and takes the defaults). One
	// already gone is no error.
	Forget(ctx context.Context, name string) error
	// List is what the API shows of the kind's documents: a slice, never
	// nil, sorted by name, each element an object with its "name".
	List(ctx context.Context) (any, error)
	// Names are the full names of what the kind keeps, each with the
	// workloads that hold it (a network's members), which keep it through
	// a project's prune.
	Names(ctx context.Context) (map[string][]string, error)
	// Exists says whether a document of the full name is in force.
	Exists(name string) bool
}

// Describer is a Keeper that says more of a document it put than its name,
// in the event that tells it: a network's egress and peers.
type Describer interface {
	Describe(doc spec.Document) string
}

// Config is what Documents are kept over: the parts a daemon opens before
// the API, and a Keeper for every kind of spec.DocKinds.
type Config struct {
	Owners  *records.Owners
	Events  *events.Bus
	Logger  *zap.Logger
	Keepers map[string]Keeper
}

// Documents changes the documents of every kind for their callers.
type Documents struct {
	owners  *records.Owners
	events  *events.Bus
	log     *zap.Logger
	keepers map[string]Keeper
}

// New keeps the documents over cfg's parts. A kind of the table without a
// keeper, or a keeper of no kind, is refused: a document of it would be
// taken and never put in force.
func New(cfg Config) (*Documents, error) {
	log := cfg.Logger
	if log == nil {
		log = zap.NewNop()
	}
	for _, k := range spec.DocKinds() {
		if cfg.Keepers[k.Name] == nil {
			return nil, fmt.Errorf("documents: no keeper for the %s documents", k.Name)
		}
	}
	for name := range cfg.Keepers {
		if _, ok := spec.DocKindOf(name); !ok {
			return nil, fmt.Errorf("documents: a keeper for %q, which is no document kind", name)
		}
	}
	return &Documents{owners: cfg.Owners, events: cfg.Events, log: log, keepers: cfg.Keepers}, nil
}

// keeper is the keeper of kind.
func (d *Documents) keeper(kind string) (Keeper, error) {
	k := d.keepers[kind]
	if k == nil {
		return nil, fmt.Errorf("%w: no document kind %q", errdefs.ErrNotFound, kind)
	}
	return k, nil
}

// publish tells the bus's readers of a change to a document of kind: the
// event's type is the kind's name.
func (d *Documents) publish(kind, name, message string) {
	ev := status.Event{Type: kind, Project: spec.ProjectOf(name), Message: message, Time: time.Now()}
	if err := d.events.Publish(ev); err != nil {
		d.log.Warn("cannot keep events for readers that resume; they still go to those reading now", zap.Error(err))
	}
}

// Key names a document of a kind: "network/NAME", "policy/NAME".
func Key(kind, name string) string { return kind + "/" + name }

func (d *Documents) docOwner(kind, name string) string {
	return d.owners.Of(Key(kind, name))
}

// setDocOwner records owner as the document's ("" for none) before the
// change it goes with is made: a daemon killed between the two leaves the
// watcher a document to put again or delete, never one it forgot.
func (d *Documents) setDocOwner(kind, name, owner string) error {
	return d.owners.Set(Key(kind, name), owner)
}

// undoDocOwner puts back the owner a refused put found: a document never
// made is no file's.
func (d *Documents) undoDocOwner(kind, name, had string) {
	if err := d.setDocOwner(kind, name, had); err != nil {
		d.log.Warn("cannot put back a document's owner", zap.String("document", Key(kind, name)), zap.Error(err))
	}
}

// OwnedDocuments lists the documents files own: Key → file.
func (d *Documents) OwnedDocuments(ctx context.Context) (map[string]string, error) {
	return d.owners.All(), nil
}

// docOf is a document as authz judges it: its owner, a file ("" for the
// API), and whether it exists, as its caller knows.
func (d *Documents) docOf(kind, name string, exists bool) authz.Doc {
	return authz.Doc{Kind: kind, Name: name, Exists: exists, Owner: d.docOwner(kind, name)}
}

// qualified is a valid copy of doc with its full names, and its kind's
// keeper.
func (d *Documents) qualified(doc spec.Document) (spec.Document, Keeper, error) {
	k, err := d.keeper(doc.DocKind())
	if err != nil {
		return nil, nil, err
	}
	doc, err = spec.Qualified(doc)
	if err != nil {
		return nil, nil, err
	}
	return doc, k, nil
}

// Put records a document for the request's caller and puts it in force:
// it is answered, as the API shows it, once it is.
func (d *Documents) Put(ctx context.Context, doc spec.Document) (any, error) {
	doc, k, err := d.qualified(doc)
	if err != nil {
		return nil, err
	}
	kind, name := doc.DocKind(), doc.DocName()
	if err := authz.Decide(authz.CallerOf(ctx), authz.Apply, d.docOf(kind, name, false)); err != nil {
		return nil, err
	}
	v, err := k.Put(ctx, doc)
	if v == nil {
		return nil, err
	}
	d.publish(kind, name, kind+" "+name+" applied"+described(k, doc))
	return v, err
}

// described is what k says of doc in its event, " (…)", or nothing.
func described(k Keeper, doc spec.Document) string {
	if dk, ok := k.(Describer); ok {
		if s := dk.Describe(doc); s != "" {
			return " (" + s + ")"
		}
	}
	return ""
}

// Delete removes a document of kind for the request's caller.
func (d *Documents) Delete(ctx context.Context, kind, name string) error {
	k, err := d.keeper(kind)
	if err != nil {
		return err
	}
	if err := authz.Decide(authz.CallerOf(ctx), authz.Remove, d.docOf(kind, name, false)); err != nil {
		return err
	}
	if err := k.Delete(ctx, name); err != nil {
		return err
	}
	d.publish(kind, name, kind+" "+name+" removed")
	return nil
}

// List is what the API shows of kind's documents.
func (d *Documents) List(ctx context.Context, kind string) (any, error) {
	k, err := d.keeper(kind)
	if err != nil {
		return nil, err
	}
	return k.List(ctx)
}

// Names are the full names of what kind keeps, sorted, each with the
// workloads that hold it.
func (d *Documents) Names(ctx context.Context, kind string) ([]string, map[string][]string, error) {
	k, err := d.keeper(kind)
	if err != nil {
		return nil, nil, err
	}
	held, err := k.Names(ctx)
	if err != nil {
		return nil, nil, err
	}
	names := make([]string, 0, len(held))
	for n := range held {
		names = append(names, n)
	}
	slices.SortFunc(names, strings.Compare)
	return names, held, nil
}

// PutDocOwned records and puts in force a document of a file.
func (d *Documents) PutDocOwned(ctx context.Context, doc spec.Document, owner string) error {
	doc, k, err := d.qualified(doc)
	if err != nil {
		return err
	}
	kind, name := doc.DocKind(), doc.DocName()
	if err := authz.Decide(authz.Caller{File: owner}, authz.Apply, d.docOf(kind, name, k.Exists(name))); err != nil {
		return err
	}
	had := d.docOwner(kind, name)
	if err := d.setDocOwner(kind, name, owner); err != nil {
		return err
	}
	if _, err := k.Put(ctx, doc); err != nil {
		d.undoDocOwner(kind, name, had)
		return err
	}
	d.publish(kind, name, kind+" "+name+" applied from "+owner+described(k, doc))
	return nil
}

// DropDocOwned forgets a document its file no longer defines (Keeper's
// Forget).
func (d *Documents) DropDocOwned(ctx context.Context, kind, name, owner string) error {
	k, err := d.keeper(kind)
	if err != nil {
		return err
	}
	if err := authz.Decide(authz.Caller{File: owner}, authz.Remove, d.docOf(kind, name, false)); err != nil {
		return err
	}
	if err := k.Forget(ctx, name); err != nil {
		return err
	}
	if err := d.setDocOwner(kind, name, ""); err != nil {
		return err
	}
	d.publish(kind, name, kind+" "+name+" document removed with "+owner)
	return nil
}
