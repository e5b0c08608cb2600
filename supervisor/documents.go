package supervisor

import (
	"context"
	"errors"
	"fmt"

	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/authz"
	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/status"
)

// A network or policy document that a file of the workloads directory
// defines belongs to that file, as its workloads do: the API may not
// change or remove it (conflict), a file may not take one made through the
// API, and the directory's watcher removes it when the file stops defining
// it, across a daemon restart too (the owners are recorded).

// DocKey names a document of a kind: "network/NAME", "policy/NAME".
func DocKey(kind, name string) string { return kind + "/" + name }

func (s *Supervisor) docOwner(kind, name string) string {
	return s.store.Owners().Of(DocKey(kind, name))
}

// setDocOwner records owner as the document's ("" for none) before the
// change it goes with is made: a daemon killed between the two leaves the
// watcher a document to put again or delete, never one it forgot.
func (s *Supervisor) setDocOwner(kind, name, owner string) error {
	return s.store.Owners().Set(DocKey(kind, name), owner)
}

// undoDocOwner puts back the owner a refused put found: a document never
// made is no file's.
func (s *Supervisor) undoDocOwner(kind, name, had string) {
	if err := s.setDocOwner(kind, name, had); err != nil {
		s.log.Warn("cannot put back a document's owner", zap.String("document", DocKey(kind, name)), zap.Error(err))
	}
}

// OwnedDocuments lists the documents files own: DocKey → file.
func (s *Supervisor) OwnedDocuments(ctx context.Context) (map[string]string, error) {
	return s.store.Owners().All(), nil
}

// docOf is a document as authz judges it: its owner, a file ("" for the
// API), and whether it exists, as its caller knows.
func (s *Supervisor) docOf(kind, name string, exists bool) authz.Doc {
	return authz.Doc{Kind: kind, Name: name, Exists: exists, Owner: s.docOwner(kind, name)}
}

// PutNetworkOwned records and puts in force a network document of a file.
func (s *Supervisor) PutNetworkOwned(ctx context.Context, n *spec.Network, owner string) error {
	n, err := qualifiedNetwork(n)
	if err != nil {
		return err
	}
	if err := authz.Decide(authz.Caller{File: owner}, authz.Apply, s.docOf(spec.KindNetwork, n.Name, s.net.Doc(n.Name) != nil)); err != nil {
		return err
	}
	had := s.docOwner(spec.KindNetwork, n.Name)
	if err := s.setDocOwner(spec.KindNetwork, n.Name, owner); err != nil {
		return err
	}
	if _, err := s.net.PutNetwork(n); err != nil {
		s.undoDocOwner(spec.KindNetwork, n.Name, had)
		return err
	}
	s.publish(status.Event{Type: status.EventNetwork, Project: spec.ProjectOf(n.Name), Message: fmt.Sprintf("network %s applied from %s (egress %v, peers %v)", n.Name, owner, n.AllowsEgress(), n.Peers)})
	return nil
}

// DropNetworkOwned forgets a network document its file no longer defines:
// the network keeps its workloads and takes the defaults.
func (s *Supervisor) DropNetworkOwned(ctx context.Context, name, owner string) error {
	if err := authz.Decide(authz.Caller{File: owner}, authz.Remove, s.docOf(spec.KindNetwork, name, false)); err != nil {
		return err
	}
	if err := s.net.ForgetNetwork(name); err != nil {
		return err
	}
	if err := s.setDocOwner(spec.KindNetwork, name, ""); err != nil {
		return err
	}
	s.publish(status.Event{Type: status.EventNetwork, Project: spec.ProjectOf(name), Message: "network " + name + " document removed with " + owner})
	return nil
}

// PutPolicyOwned records and puts in force a policy document of a file.
func (s *Supervisor) PutPolicyOwned(ctx context.Context, p *spec.Policy, owner string) error {
	p, err := qualifiedPolicy(p)
	if err != nil {
		return err
	}
	if err := authz.Decide(authz.Caller{File: owner}, authz.Apply, s.docOf(spec.KindPolicy, p.Name, s.net.HasPolicy(p.Name))); err != nil {
		return err
	}
	had := s.docOwner(spec.KindPolicy, p.Name)
	if err := s.setDocOwner(spec.KindPolicy, p.Name, owner); err != nil {
		return err
	}
	if err := s.net.SetPolicy(p.Name, p); err != nil {
		s.undoDocOwner(spec.KindPolicy, p.Name, had)
		return err
	}
	s.publish(status.Event{Type: status.EventPolicy, Project: spec.ProjectOf(p.Name), Message: "policy " + p.Name + " applied from " + owner})
	return nil
}

// DropPolicyOwned removes a policy its file no longer defines.
func (s *Supervisor) DropPolicyOwned(ctx context.Context, name, owner string) error {
	if err := authz.Decide(authz.Caller{File: owner}, authz.Remove, s.docOf(spec.KindPolicy, name, false)); err != nil {
		return err
	}
	if err := s.net.SetPolicy(name, nil); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		return err
	}
	if err := s.setDocOwner(spec.KindPolicy, name, ""); err != nil {
		return err
	}
	s.publish(status.Event{Type: status.EventPolicy, Project: spec.ProjectOf(name), Message: "policy " + name + " removed with " + owner})
	return nil
}

// Networks is the isolated networks, and the documents of networks that
// have no namespace.
func (s *Supervisor) Networks(ctx context.Context) ([]status.Network, error) { return s.net.Networks() }

// Policies is the policy documents and what each is in force for.
func (s *Supervisor) Policies(ctx context.Context) []status.Policy { return s.net.Policies() }

// PutPolicy records a policy and puts it in force: it is answered once
// its rules are in the kernel.
func (s *Supervisor) PutPolicy(ctx context.Context, p *spec.Policy) (*status.Policy, error) {
	p, err := qualifiedPolicy(p)
	if err != nil {
		return nil, err
	}
	if err := authz.Decide(authz.CallerOf(ctx), authz.Apply, s.docOf(spec.KindPolicy, p.Name, false)); err != nil {
		return nil, err
	}
	if err := s.net.SetPolicy(p.Name, p); err != nil {
		return nil, err
	}
	s.publish(status.Event{Type: status.EventPolicy, Project: spec.ProjectOf(p.Name), Message: "policy " + p.Name + " applied"})
	for _, v := range s.net.Policies() {
		if v.Name == p.Name {
			return &v, nil
		}
	}
	return nil, fmt.Errorf("%w: policy %s removed meanwhile", errdefs.ErrNotFound, p.Name)
}

// DeletePolicy removes a policy made through the API.
func (s *Supervisor) DeletePolicy(ctx context.Context, name string) error {
	if err := authz.Decide(authz.CallerOf(ctx), authz.Remove, s.docOf(spec.KindPolicy, name, false)); err != nil {
		return err
	}
	if err := s.net.SetPolicy(name, nil); err != nil {
		return err
	}
	s.publish(status.Event{Type: status.EventPolicy, Project: spec.ProjectOf(name), Message: "policy " + name + " removed"})
	return nil
}

// PutNetwork records a network's document and applies it to the network
// when it exists.
func (s *Supervisor) PutNetwork(ctx context.Context, n *spec.Network) (*status.Network, error) {
	n, err := qualifiedNetwork(n)
	if err != nil {
		return nil, err
	}
	if err := authz.Decide(authz.CallerOf(ctx), authz.Apply, s.docOf(spec.KindNetwork, n.Name, false)); err != nil {
		return nil, err
	}
	nw, err := s.net.PutNetwork(n)
	if nw == nil {
		return nil, err
	}
	s.publish(status.Event{Type: status.EventNetwork, Project: spec.ProjectOf(n.Name), Message: fmt.Sprintf("network %s applied (egress %v, peers %v)", n.Name, n.AllowsEgress(), n.Peers)})
	return nw, err
}

// DeleteNetwork deletes an isolated network that no workload uses, and
// its document.
func (s *Supervisor) DeleteNetwork(ctx context.Context, name string) error {
	if err := authz.Decide(authz.CallerOf(ctx), authz.Remove, s.docOf(spec.KindNetwork, name, false)); err != nil {
		return err
	}
	if err := s.net.DeleteNetwork(name); err != nil {
		return err
	}
	s.publish(status.Event{Type: status.EventNetwork, Project: spec.ProjectOf(name), Message: "network " + name + " removed"})
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
