package netplane

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/atomicfile"
	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/status"
)

// The network and policy documents are desired state, as workloads are,
// and outlive reboots: each kind is one file under the state dir, replaced
// whole.
const (
	netDocsFile  = "networks.json"
	policiesFile = "policies.json"
)

func (p *Plane) loadNetDocs() {
	docs := loadDocs[spec.Network](p, netDocsFile, "the network documents; networks get the defaults", func(n *spec.Network) string { return n.Name })
	p.docMu.Lock()
	defer p.docMu.Unlock()
	p.netDocs.Store(&docs)
}

func (p *Plane) loadPolicies() {
	docs := loadDocs[spec.Policy](p, policiesFile, "the policies; none is in force until one is applied", func(pl *spec.Policy) string { return pl.Name })
	p.docMu.Lock()
	defer p.docMu.Unlock()
	p.policies = docs
}

// loadDocs reads documents of one kind that an earlier daemon recorded in
// file under the state dir, keeping each that is valid and filed under its
// own name; what says what is lost when it cannot be read.
func loadDocs[T any, D interface {
	*T
	Validate() error
}](p *Plane, file, what string, name func(D) string) map[string]D {
	var docs map[string]D
	b, err := os.ReadFile(filepath.Join(p.cfg.StateDir, file))
	if err == nil {
		err = json.Unmarshal(b, &docs)
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		p.log.Error("cannot read "+what, zap.String("file", file), zap.Error(err))
	}
	out := make(map[string]D, len(docs))
	for n, d := range docs {
		if d != nil && name(d) == n && d.Validate() == nil {
			out[n] = d
		}
	}
	return out
}

// saveDocs records docs of a kind in file, whole.
func (p *Plane) saveDocs(file string, docs any) error {
	b, err := json.Marshal(docs)
	if err != nil {
		return err
	}
	if err := atomicfile.Write(filepath.Join(p.cfg.StateDir, file), b, 0o600); err != nil {
		return fmt.Errorf("cannot record the %s: %w", strings.TrimSuffix(file, ".json"), err)
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
		c := *n
		next[name] = &c
	}
	if err := p.saveDocs(netDocsFile, next); err != nil {
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
	if users := p.cfg.Users(name); len(users) > 0 {
		return fmt.Errorf("%w: network %s is used by %s", errdefs.ErrConflict, name, strings.Join(users, ", "))
	}
	doc := p.Doc(name) != nil
	if _, err := p.nets.Open(name); err != nil {
		if errors.Is(err, errdefs.ErrNotFound) && doc {
			return p.setDoc(name, nil)
		}
		return err
	}
	if err := p.nets.Delete(name); err != nil {
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
		users := p.cfg.Users(n)
		sort.Strings(users)
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
