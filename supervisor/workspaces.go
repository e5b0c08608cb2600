package supervisor

import (
	"context"

	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/status"
)

// PutWorkspace records a workspace document: the workloads of the
// workspace get its configurations from their next start on.
func (s *Supervisor) PutWorkspace(ctx context.Context, ws *spec.Workspace) (*spec.Workspace, error) {
	ws, err := s.workspaces.Put(ws)
	if err != nil {
		return nil, err
	}
	s.publish(status.Event{Type: status.EventApplied, Project: ws.Project, Message: "workspace " + ws.Name + " applied"})
	return ws.Redacted(), nil
}

// DeleteWorkspace removes a workspace document.
func (s *Supervisor) DeleteWorkspace(ctx context.Context, name string) error {
	if err := s.workspaces.Delete(name); err != nil {
		return err
	}
	s.publish(status.Event{Type: status.EventRemoved, Project: spec.ProjectOf(name), Message: "workspace " + name + " removed"})
	return nil
}

// Workspaces lists the workspace documents, secrets redacted.
func (s *Supervisor) Workspaces(ctx context.Context) []spec.Workspace { return s.workspaces.List() }
