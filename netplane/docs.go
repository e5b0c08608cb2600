package netplane

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/status"
)

// The network and policy documents are desired state, as workloads are,
// and outlive reboots: each is a record of the daemon's store. An older
// daemon kept each kind in one file under the state dir, which Restore
// moves into the store.
const (
	netDocsFile  = "networks.json"
	policiesFile = "policies.json"
)

func (p *Plane) loadNetDocs() {
	docs := loadDocs[spec.Network](p, spec.KindNetwork, netDocsFile, "network documents; networks get the defaults", func(n *spec.Network) string { return n.Name })
	p.docMu.Lock()
	defer p.docMu.Unlock()
	p.netDocs.Store(&docs)
}

func (p *Plane) loadPolicies() {
	docs := loadDocs[spec.Policy](p, spec.KindPolicy, policiesFile, "policies; none is in force until one is applied", func(pl *spec.Policy) string { return pl.Name })
	p.docMu.Lock()
	defer p.docMu.Unlock()
	p.policies = docs
}

// loadDocs reads the documents of a kind that an earlier daemon recorded,
// moving those of its older whole file into the store first, and keeps
// each that is valid and recorded under its own name; what names what is
// lost when one cannot be read.
func loadDocs[T any, D interface {
	*T
	Validate() error
}](p *Plane, kind, file, what string, name func(D) string) map[string]D {
	recs := p.cfg.Store.Docs(kind)
	maps.Copy(recs, p.importFile(kind, file, what))
	out := map[string]D{}
	for n, b := range recs {
		d := D(new(T))
		if err := json.Unmarshal(b, d); err != nil || name(d) != n || d.Validate() != nil {
			p.log.Error("cannot read one of the "+what, zap.String(kind, n), zap.Error(err))
			continue
		}
		out[n] = d
	}
	return out
}

// importFile moves an older daemon's whole file of a kind's documents
// into the store, document by document, removes it once all are in, and
// returns them.
func (p *Plane) importFile(kind, file, what string) map[string][]byte {
	path := filepath.Join(p.cfg.StateDir, file)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	var docs map[string]json.RawMessage
	if err == nil {
		err = json.Unmarshal(b, &docs)
	}
	for n, d := range docs {
		if err == nil {
			err = p.cfg.Store.PutDoc(kind, n, d)
		}
	}
	out := make(map[string][]byte, len(docs))
	for n, d := range docs {
		out[n] = d
	}
	if err != nil {
		p.log.Error("cannot move the "+what+" into the state journal; the file is kept", zap.String("file", path), zap.Error(err))
		return out
	}
	_ = os.Remove(path)
	return out
}

// saveDoc records one document of a kind; nil removes it.
func (p *Plane) saveDoc(kind, name string, doc any) error {
	var b []byte
	if doc != nil && !reflect.ValueOf(doc).IsNil() {
		var err error
		if b, err = json.Marshal(doc); err != nil {
			return err
		}
	}
	if err := p.cfg.Store.PutDoc(kind, name, b); err != nil {
		return fmt.Errorf("cannot record %s %s: %w", kind, name, err)
	}
	return nil
}

// Doc is a network's document, nil when it has none.
func (p *Plane) Doc(name string) *spec.Network { return p.docs()[name] }

// docs is the network documents in force; changed only whole, under docMu.
func (p *Plane) docs() map[string]*spec.Network {
	if d := p.netDocs.Load(); d != nil {
		return *d
	}
	return nil
}

// setDoc records a network's document, nil forgetting it.
func (p *Plane) setDoc(name string, n *spec.Network) error {
	p.docMu.Lock()
	defer p.docMu.Unlock()
	next := maps.Clone(p.docs())
	if next == nil {
		next = map[string]*spec.Network{}
	}
	if n == nil {
		if _, ok := next[name]; !ok {
			return nil
		}
		delete(next, name)
	} else {
		next[name] = n.Clone()
	}
	if err := p.saveDoc(spec.KindNetwork, name, next[name]); err != nil {
		return err
	}
	p.netDocs.Store(&next)
	return nil
}

// PutNetwork records a network's document and applies it to the network
// if it exists: a changed egress rewrites its rules at once.
func (p *Plane) PutNetwork(n *spec.Network) (*status.Network, error) {
	if err := n.Validate(); err != nil {
		return nil, err
	}
	if n.DeclaredReach() {
		if err := p.ReachAvailable(); err != nil {
			return nil, fmt.Errorf("network %s: %w", n.Name, err)
		}
	}
	was := p.Doc(n.Name).DeclaredReach()
	if err := p.setDoc(n.Name, n); err != nil {
		return nil, err
	}
	if err := p.WriteRules(n.Name); err != nil {
		return nil, err
	}
	if was != n.DeclaredReach() {
		if err := p.writeGuards(); err != nil {
			return nil, err
		}
	}
	ns, err := p.Networks()
	if err != nil {
		return nil, err
	}
	for _, v := range ns {
		if v.Name == n.Name {
			return &v, nil
		}
	}
	return &status.Network{Name: n.Name, Egress: n.AllowsEgress(), Workloads: []string{}}, nil
}

// ForgetNetwork drops a network's document: the network keeps its
// workloads and takes the defaults.
func (p *Plane) ForgetNetwork(name string) error {
	was := p.Doc(name).DeclaredReach()
	if err := p.setDoc(name, nil); err != nil {
		return err
	}
	if err := p.WriteRules(name); err != nil {
		return err
	}
	if was {
		return p.writeGuards()
	}
	return nil
}

// DeleteNetwork deletes an isolated network that no workload uses, and
// its document, whether or not the namespace is there: a network whose
// last workload went has none, and its settings must not linger for a
// later network of that name.
func (p *Plane) DeleteNetwork(name string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if users := p.users(name); len(users) > 0 {
		return fmt.Errorf("%w: network %s is used by %s", errdefs.ErrConflict, name, strings.Join(users, ", "))
	}
	doc := p.Doc(name) != nil
	if _, err := p.nets.Open(name); err != nil {
		if errors.Is(err, errdefs.ErrNotFound) && doc {
			return p.setDoc(name, nil)
		}
		return err
	}
	if err := p.nets.DeleteLinked(name, p.Link(name)); err != nil {
		return err
	}
	p.forgetLink(name)
	was := p.Doc(name).DeclaredReach()
	if err := p.setDoc(name, nil); err != nil {
		return err
	}
	if was {
		p.rewriteGuards()
	}
	return nil
}

// Networks lists the isolated networks and who uses them, and the
// documents of networks that have no namespace (none of their workloads
// runs yet, or any more) with their settings.
func (p *Plane) Networks() ([]status.Network, error) {
	names, err := p.nets.List()
	if err != nil {
		return nil, err
	}
	out := make([]status.Network, 0, len(names))
	for _, n := range names {
		nw, err := p.nets.Open(n)
		if err != nil {
			continue
		}
		users := p.users(n)
		an := status.Network{Name: n, Path: nw.Path, Workloads: users}
		if l := p.Link(n); l != nil {
			an.Link, an.Address, an.Gateway = l.Name, l.Inner.String(), l.Host.String()
			an.Egress = p.fw != nil && p.Doc(n).AllowsEgress()
			an.Published = p.publishedIn(n)
		}
		out = append(out, an)
	}
	for n, doc := range p.docs() {
		if !slices.Contains(names, n) {
			out = append(out, status.Network{Name: n, Workloads: []string{}, Egress: doc.AllowsEgress()})
		}
	}
	slices.SortFunc(out, func(a, b status.Network) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}
