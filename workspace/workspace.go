// Package workspace keeps the workspace documents in force, by full name
// (a project's workspace "demo" is "ci-7.demo"), each change recorded
// before it is in force, and says what configurations a workload's
// workspace gives it, under codefly's names.
//
// It is the keeper of the workspace documents (documents.Keeper): it does
// not decide who may change one (the documents' package does), nor when a
// workload takes its configurations (from its next start: the
// supervisor's, which reads them here).
package workspace

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/spec"
)

// Store keeps documents durably, one record (JSON) a document, as
// records.Store does.
type Store interface {
	Docs(kind string) map[string][]byte
	PutDoc(kind, name string, record []byte) error
}

// Set is the workspace documents in force: read without a lock, replaced
// whole at each change.
type Set struct {
	st Store
	// mu orders the changes: it is held while the next map is made, the
	// change recorded in st and all replaced. all, by full name, is
	// replaced whole under mu and loaded without it; a map once stored
	// never changes.
	mu  sync.Mutex
	all atomic.Pointer[map[string]*spec.Workspace]
}

// Open reads the workspace documents st holds. One that does not load is
// left out, and said to log: its workloads get no workspace
// configuration.
func Open(st Store, log *zap.Logger) *Set {
	m := map[string]*spec.Workspace{}
	for name, b := range st.Docs(spec.KindWorkspace) {
		var ws spec.Workspace
		if err := json.Unmarshal(b, &ws); err != nil || ws.Name != name || ws.Validate() != nil {
			log.Error("cannot read a workspace document; its workloads get no workspace configuration", zap.String("workspace", name), zap.Error(err))
			continue
		}
		m[name] = &ws
	}
	s := &Set{st: st}
	s.all.Store(&m)
	return s
}

// Put records a workspace document and puts it in force: its workloads
// get its configurations from their next start on. It answers with the
// document as kept, its full name and its secrets redacted.
func (s *Set) Put(ctx context.Context, doc spec.Document) (any, error) {
	ws, ok := doc.(*spec.Workspace)
	if !ok {
		return nil, fmt.Errorf("%w: a %s document is no workspace", errdefs.ErrInvalid, doc.DocKind())
	}
	if err := ws.Validate(); err != nil {
		return nil, err
	}
	ws = ws.Clone()
	ws.Qualify()
	b, err := json.Marshal(ws)
	if err != nil {
		return nil, err
	}
	if err := s.set(ws.Name, b, ws); err != nil {
		return nil, err
	}
	return ws.Redacted(), nil
}

// Delete removes the workspace document of a full name.
func (s *Set) Delete(ctx context.Context, name string) error {
	if !s.Exists(name) {
		return fmt.Errorf("%w: no workspace named %q", errdefs.ErrNotFound, name)
	}
	return s.set(name, nil, nil)
}

// Forget is Delete, a workspace already gone being no error.
func (s *Set) Forget(ctx context.Context, name string) error {
	if !s.Exists(name) {
		return nil
	}
	return s.set(name, nil, nil)
}

// Exists says whether a workspace document of the full name is in force.
func (s *Set) Exists(name string) bool {
	_, ok := (*s.all.Load())[name]
	return ok
}

// Names are the workspace documents' full names; no workload holds one.
func (s *Set) Names(ctx context.Context) (map[string][]string, error) {
	all := *s.all.Load()
	out := make(map[string][]string, len(all))
	for name := range all {
		out[name] = nil
	}
	return out, nil
}

// set records ws under name (nil removes it), then puts it in force.
func (s *Set) set(name string, record []byte, ws *spec.Workspace) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.st.PutDoc(spec.KindWorkspace, name, record); err != nil {
		return fmt.Errorf("cannot record workspace %s: %w", name, err)
	}
	next := maps.Clone(*s.all.Load())
	if ws == nil {
		delete(next, name)
	} else {
		next[name] = ws
	}
	s.all.Store(&next)
	return nil
}

// List is the workspace documents by name, secrets redacted: a
// []spec.Workspace.
func (s *Set) List(ctx context.Context) (any, error) {
	all := *s.all.Load()
	out := make([]spec.Workspace, 0, len(all))
	for _, ws := range all {
		out = append(out, *ws.Redacted())
	}
	slices.SortFunc(out, func(a, b spec.Workspace) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Vars are the configurations w's workspace document gives it, under
// codefly's names: the document of its identity's workspace in its
// project; nil without one.
func (s *Set) Vars(w *spec.Workload) map[string]string {
	ws := (*s.all.Load())[spec.FullName(spec.ProjectOf(w.Name), w.Identified().Workspace)]
	if ws == nil {
		return nil
	}
	out := map[string]string{}
	for name, kv := range ws.Configuration {
		for k, v := range kv {
			out[spec.WorkspaceConfigurationVar(name, k, false)] = v
		}
	}
	for name, kv := range ws.SecretConfiguration {
		for k, v := range kv {
			out[spec.WorkspaceConfigurationVar(name, k, true)] = v
		}
	}
	return out
}
