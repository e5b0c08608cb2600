// Package documentstest has what tests of the documents' callers need: a
// keeper of any kind that keeps its documents in memory, for the kinds a
// test does not put in force for real, so that a test over every kind of
// the table needs no change when a kind is added.
package documentstest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/spec"
)

// Memory keeps documents of one kind in memory (a documents.Keeper): put
// documents are listed as they were put, by name.
type Memory struct {
	mu   sync.Mutex // guards docs
	docs map[string]spec.Document
}

// NewMemory is a keeper that holds nothing yet.
func NewMemory() *Memory { return &Memory{docs: map[string]spec.Document{}} }

// Put keeps doc and answers with it.
func (m *Memory) Put(ctx context.Context, doc spec.Document) (any, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.docs[doc.DocName()] = doc.CloneDocument()
	return doc, nil
}

// Delete removes the document of a name; one not there is not found.
func (m *Memory) Delete(ctx context.Context, name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.docs[name]; !ok {
		return fmt.Errorf("%w: no document named %q", errdefs.ErrNotFound, name)
	}
	delete(m.docs, name)
	return nil
}

// Forget removes the document of a name, if it is there.
func (m *Memory) Forget(ctx context.Context, name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.docs, name)
	return nil
}

// List is the documents by name.
func (m *Memory) List(ctx context.Context) (any, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]spec.Document, 0, len(m.docs))
	for _, d := range m.docs {
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b spec.Document) int { return strings.Compare(a.DocName(), b.DocName()) })
	return out, nil
}

// Names are the documents' names; no workload holds one.
func (m *Memory) Names(ctx context.Context) (map[string][]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string][]string, len(m.docs))
	for name := range m.docs {
		out[name] = nil
	}
	return out, nil
}

// Exists says whether a document of the name is kept.
func (m *Memory) Exists(name string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.docs[name]
	return ok
}
