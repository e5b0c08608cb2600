package supervisor

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"

	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/atomicfile"
	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/status"
)

// netDocsFile holds the network documents under the state dir: they are
// desired state, as workloads are, and outlive reboots.
const netDocsFile = "networks.json"

// loadNetDocs reads the network documents an earlier daemon recorded.
func (s *Supervisor) loadNetDocs() {
	docs := loadDocs[spec.Network](s, netDocsFile, "the network documents; networks get the defaults", func(n *spec.Network) string { return n.Name })
	s.docMu.Lock()
	defer s.docMu.Unlock()
	s.netDocs.Store(&docs)
}

// loadDocs reads documents of one kind that an earlier daemon recorded
// in file under the state dir, keeping each that is valid and filed
// under its own name; what says what is lost when it cannot be read.
func loadDocs[T any, D interface {
	*T
	Validate() error
}](s *Supervisor, file, what string, name func(D) string) map[string]D {
	var docs map[string]D
	if _, err := readJSON(filepath.Join(s.cfg.StateDir, file), &docs); err != nil {
		s.log.Error("cannot read "+what, zap.Error(err))
	}
	out := make(map[string]D, len(docs))
	for n, d := range docs {
		if d != nil && name(d) == n && d.Validate() == nil {
			out[n] = d
		}
	}
	return out
}

// netDoc is a network's document, nil when it has none.
func (s *Supervisor) netDoc(name string) *spec.Network {
	return s.networkDocs()[name]
}

// networkDocs is the network documents in force; to be changed only whole,
// under docMu (saveNetDocs).
func (s *Supervisor) networkDocs() map[string]*spec.Network {
	if p := s.netDocs.Load(); p != nil {
		return *p
	}
	return nil
}

// saveNetDocs writes the documents with next in place of the old set;
// the caller holds docMu.
func (s *Supervisor) saveNetDocs(next map[string]*spec.Network) error {
	b, err := json.Marshal(next)
	if err != nil {
		return err
	}
	if err := atomicfile.Write(filepath.Join(s.cfg.StateDir, netDocsFile), b, 0o600); err != nil {
		return fmt.Errorf("cannot record the network documents: %w", err)
	}
	s.netDocs.Store(&next)
	return nil
}

// putNetwork records a network's document and applies it to the network
// if it exists: a changed egress rewrites its rules at once.
func (s *Supervisor) putNetwork(ctx context.Context, n *spec.Network) (*status.Network, error) {
	if err := n.Validate(); err != nil {
		return nil, err
	}
	s.docMu.Lock()
	next := make(map[string]*spec.Network, len(s.networkDocs())+1)
	for k, v := range s.networkDocs() {
		next[k] = v
	}
	c := *n
	next[n.Name] = &c
	err := s.saveNetDocs(next)
	s.docMu.Unlock()
	if err != nil {
		return nil, err
	}
	if err := s.writeRules(n.Name); err != nil {
		return nil, err
	}
	ns, err := s.networkList()
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

// forgetNetDoc drops a deleted network's document.
func (s *Supervisor) forgetNetDoc(name string) {
	s.docMu.Lock()
	defer s.docMu.Unlock()
	if _, ok := s.networkDocs()[name]; !ok {
		return
	}
	next := make(map[string]*spec.Network, len(s.networkDocs()))
	for k, v := range s.networkDocs() {
		if k != name {
			next[k] = v
		}
	}
	if err := s.saveNetDocs(next); err != nil {
		s.log.Warn("cannot forget a network's document", zap.String("network", name), zap.Error(err))
	}
}
