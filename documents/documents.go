// Package documents keeps the network and policy documents, as the API,
// a project's up and down and the workloads directory change them: who may
// change one (asked of authz, with the file that owns it), which file owns
// one (the records' owners, set before the change it goes with), the
// change itself (the network plane's) and the event that tells it.
//
// It is not where a document is in force (the network plane keeps the
// networks, their rules and the policies, and knows which workloads use a
// network), nor what a workload is: the supervisor's, which needs nothing
// of this package.
package documents

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/authz"
	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/events"
	"github.com/flyd-dev/flyd/netplane"
	"github.com/flyd-dev/flyd/records"
	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/status"
)

// A network or policy document that a file of the workloads directory
// defines belongs to that file, as its workloads do: the API may not
// change or remove it (conflict), a file may not take one made through the
// API, and the directory's watcher removes it when the file stops defining
// it, across a daemon restart too (the owners are recorded).

// Config is what Documents are kept over: the parts a daemon opens before
// the supervisor.
type Config struct {
	Owners *records.Owners
	Net    *netplane.Plane
	Events *events.Bus
	Logger *zap.Logger
}

// Documents changes the network and policy documents for their callers.
type Documents struct {
	owners *records.Owners
	net    *netplane.Plane
	events *events.Bus
	log    *zap.Logger
}

// New keeps the documents over cfg's parts.
func New(cfg Config) *Documents {
	log := cfg.Logger
	if log == nil {
		log = zap.NewNop()
	}
	return &Documents{owners: cfg.Owners, net: cfg.Net, events: cfg.Events, log: log}
}

// publish tells the bus's readers of a change.
func (d *Documents) publish(ev status.Event) {
	ev.Time = time.Now()
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

// PutNetworkOwned records and puts in force a network document of a file.
func (d *Documents) PutNetworkOwned(ctx context.Context, n *spec.Network, owner string) error {
	n, err := qualifiedNetwork(n)
	if err != nil {
		return err
	}
	if err := authz.Decide(authz.Caller{File: owner}, authz.Apply, d.docOf(spec.KindNetwork, n.Name, d.net.Doc(n.Name) != nil)); err != nil {
		return err
	}
	had := d.docOwner(spec.KindNetwork, n.Name)
	if err := d.setDocOwner(spec.KindNetwork, n.Name, owner); err != nil {
		return err
	}
	if _, err := d.net.PutNetwork(n); err != nil {
		d.undoDocOwner(spec.KindNetwork, n.Name, had)
		return err
	}
	d.publish(status.Event{Type: status.EventNetwork, Project: spec.ProjectOf(n.Name), Message: fmt.Sprintf("network %s applied from %s (egress %v, peers %v)", n.Name, owner, n.AllowsEgress(), n.Peers)})
	return nil
}

// DropNetworkOwned forgets a network document its file no longer defines:
// the network keeps its workloads and takes the defaults.
func (d *Documents) DropNetworkOwned(ctx context.Context, name, owner string) error {
	if err := authz.Decide(authz.Caller{File: owner}, authz.Remove, d.docOf(spec.KindNetwork, name, false)); err != nil {
		return err
	}
	if err := d.net.ForgetNetwork(name); err != nil {
		return err
	}
	if err := d.setDocOwner(spec.KindNetwork, name, ""); err != nil {
		return err
	}
	d.publish(status.Event{Type: status.EventNetwork, Project: spec.ProjectOf(name), Message: "network " + name + " document removed with " + owner})
	return nil
}

// PutPolicyOwned records and puts in force a policy document of a file.
func (d *Documents) PutPolicyOwned(ctx context.Context, p *spec.Policy, owner string) error {
	p, err := qualifiedPolicy(p)
	if err != nil {
		return err
	}
	if err := authz.Decide(authz.Caller{File: owner}, authz.Apply, d.docOf(spec.KindPolicy, p.Name, d.net.HasPolicy(p.Name))); err != nil {
		return err
	}
	had := d.docOwner(spec.KindPolicy, p.Name)
	if err := d.setDocOwner(spec.KindPolicy, p.Name, owner); err != nil {
		return err
	}
	if err := d.net.SetPolicy(p.Name, p); err != nil {
		d.undoDocOwner(spec.KindPolicy, p.Name, had)
		return err
	}
	d.publish(status.Event{Type: status.EventPolicy, Project: spec.ProjectOf(p.Name), Message: "policy " + p.Name + " applied from " + owner})
	return nil
}

// DropPolicyOwned removes a policy its file no longer defines.
func (d *Documents) DropPolicyOwned(ctx context.Context, name, owner string) error {
	if err := authz.Decide(authz.Caller{File: owner}, authz.Remove, d.docOf(spec.KindPolicy, name, false)); err != nil {
		return err
	}
	if err := d.net.SetPolicy(name, nil); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		return err
	}
	if err := d.setDocOwner(spec.KindPolicy, name, ""); err != nil {
		return err
	}
	d.publish(status.Event{Type: status.EventPolicy, Project: spec.ProjectOf(name), Message: "policy " + name + " removed with " + owner})
	return nil
}

// Networks is the isolated networks, and the documents of networks that
// have no namespace.
func (d *Documents) Networks(ctx context.Context) ([]status.Network, error) { return d.net.Networks() }

// Policies is the policy documents and what each is in force for.
func (d *Documents) Policies(ctx context.Context) []status.Policy { return d.net.Policies() }

// PutPolicy records a policy and puts it in force: it is answered once
// its rules are in the kernel.
func (d *Documents) PutPolicy(ctx context.Context, p *spec.Policy) (*status.Policy, error) {
	p, err := qualifiedPolicy(p)
	if err != nil {
		return nil, err
	}
	if err := authz.Decide(authz.CallerOf(ctx), authz.Apply, d.docOf(spec.KindPolicy, p.Name, false)); err != nil {
		return nil, err
	}
	if err := d.net.SetPolicy(p.Name, p); err != nil {
		return nil, err
	}
	d.publish(status.Event{Type: status.EventPolicy, Project: spec.ProjectOf(p.Name), Message: "policy " + p.Name + " applied"})
	for _, v := range d.net.Policies() {
		if v.Name == p.Name {
			return &v, nil
		}
	}
	return nil, fmt.Errorf("%w: policy %s removed meanwhile", errdefs.ErrNotFound, p.Name)
}

// DeletePolicy removes a policy made through the API.
func (d *Documents) DeletePolicy(ctx context.Context, name string) error {
	if err := authz.Decide(authz.CallerOf(ctx), authz.Remove, d.docOf(spec.KindPolicy, name, false)); err != nil {
		return err
	}
	if err := d.net.SetPolicy(name, nil); err != nil {
		return err
	}
	d.publish(status.Event{Type: status.EventPolicy, Project: spec.ProjectOf(name), Message: "policy " + name + " removed"})
	return nil
}

// PutNetwork records a network's document and applies it to the network
// when it exists.
func (d *Documents) PutNetwork(ctx context.Context, n *spec.Network) (*status.Network, error) {
	n, err := qualifiedNetwork(n)
	if err != nil {
		return nil, err
	}
	if err := authz.Decide(authz.CallerOf(ctx), authz.Apply, d.docOf(spec.KindNetwork, n.Name, false)); err != nil {
		return nil, err
	}
	nw, err := d.net.PutNetwork(n)
	if nw == nil {
		return nil, err
	}
	d.publish(status.Event{Type: status.EventNetwork, Project: spec.ProjectOf(n.Name), Message: fmt.Sprintf("network %s applied (egress %v, peers %v)", n.Name, n.AllowsEgress(), n.Peers)})
	return nw, err
}

// DeleteNetwork deletes an isolated network that no workload uses, and
// its document.
func (d *Documents) DeleteNetwork(ctx context.Context, name string) error {
	if err := authz.Decide(authz.CallerOf(ctx), authz.Remove, d.docOf(spec.KindNetwork, name, false)); err != nil {
		return err
	}
	if err := d.net.DeleteNetwork(name); err != nil {
		return err
	}
	d.publish(status.Event{Type: status.EventNetwork, Project: spec.ProjectOf(name), Message: "network " + name + " removed"})
	return nil
}

// qualifiedNetwork is a valid network document with its full name.
func qualifiedNetwork(n *spec.Network) (*spec.Network, error) {
	if err := n.Validate(); err != nil {
		return nil, err
	}
	n = n.Clone()
	n.Qualify()
	return n, nil
}

// qualifiedPolicy is a valid policy with its full names.
func qualifiedPolicy(p *spec.Policy) (*spec.Policy, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	p = p.Clone()
	p.Qualify()
	return p, nil
}
