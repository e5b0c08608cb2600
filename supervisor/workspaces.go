package supervisor

import "github.com/flyd-dev/flyd/workspace"

// WorkspaceSet is the workspace documents the supervisor gives its
// workloads the configurations of, from their next start: the daemon has
// them kept (put, deleted, listed) through the documents, as every kind
// of document beside workloads.
func (s *Supervisor) WorkspaceSet() *workspace.Set { return s.workspaces }
