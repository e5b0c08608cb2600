package supervisor

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/status"
)

// workspaces are the workspace documents in force, by full name (a
// project's workspace "demo" is "ci-7.demo"); replaced whole, each change
// recorded in the store first.
type workspaces struct {
	m atomic.Pointer[map[string]*spec.Workspace]
}

func (ws *workspaces) all() map[string]*spec.Workspace {
	if p := ws.m.Load(); p != nil {
		return *p
	}
	return nil
}

// loadWorkspaces reads the workspace documents the store holds.
func (s *Supervisor) loadWorkspaces() {
	m := map[string]*spec.Workspace{}
	for name, b := range s.store.Docs(spec.KindWorkspace) {
		var ws spec.Workspace
		if err := json.Unmarshal(b, &ws); err != nil || ws.Name != name || ws.Validate() != nil {
			s.log.Error("cannot read a workspace document; its workloads get no workspace configuration", zap.String("workspace", name), zap.Error(err))
			continue
		}
		m[name] = &ws
	}
	s.workspaces.m.Store(&m)
}

// PutWorkspace records a workspace document: the workloads of the
// workspace get its configurations from their next start on.
func (s *Supervisor) PutWorkspace(ctx context.Context, ws *spec.Workspace) (*spec.Workspace, error) {
	if err := ws.Validate(); err != nil {
		return nil, err
	}
	ws = ws.Clone()
	ws.Qualify()
	b, err := json.Marshal(ws)
	if err != nil {
		return nil, err
	}
	if err := s.setWorkspace(ws.Name, b, ws); err != nil {
		return nil, err
	}
	s.publish(status.Event{Type: status.EventApplied, Project: ws.Project, Message: "workspace " + ws.Name + " applied"})
	return ws.Redacted(), nil
}

// DeleteWorkspace removes a workspace document.
func (s *Supervisor) DeleteWorkspace(ctx context.Context, name string) error {
	if _, ok := s.workspaces.all()[name]; !ok {
		return fmt.Errorf("%w: no workspace named %q", errdefs.ErrNotFound, name)
	}
	if err := s.setWorkspace(name, nil, nil); err != nil {
		return err
	}
	s.publish(status.Event{Type: status.EventRemoved, Project: spec.ProjectOf(name), Message: "workspace " + name + " removed"})
	return nil
}

// setWorkspace records ws under name (nil removes it), then puts it in
// force; s.mu orders the changes.
func (s *Supervisor) setWorkspace(name string, record []byte, ws *spec.Workspace) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.store.PutDoc(spec.KindWorkspace, name, record); err != nil {
		return fmt.Errorf("cannot record workspace %s: %w", name, err)
	}
	next := maps.Clone(s.workspaces.all())
	if next == nil {
		next = map[string]*spec.Workspace{}
	}
	if ws == nil {
		delete(next, name)
	} else {
		next[name] = ws
	}
	s.workspaces.m.Store(&next)
	return nil
}

// Workspaces lists the workspace documents, secrets redacted.
func (s *Supervisor) Workspaces(ctx context.Context) []spec.Workspace {
	all := s.workspaces.all()
	out := make([]spec.Workspace, 0, len(all))
	for _, ws := range all {
		out = append(out, *ws.Redacted())
	}
	slices.SortFunc(out, func(a, b spec.Workspace) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// workspaceVars are the configurations w's workspace document gives it,
// under codefly's names: the document of its identity's workspace in its
// project.
func (s *Supervisor) workspaceVars(w *spec.Workload) map[string]string {
	ws := s.workspaces.all()[spec.FullName(spec.ProjectOf(w.Name), w.Identified().Workspace)]
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
