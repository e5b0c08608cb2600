package api

import (
	"context"
	"net/url"

	"github.com/flyd-dev/flyd/spec"
)

// Documents are a project's documents, as its files say.
type Documents struct {
	Workloads  []*spec.Workload  `json:"workloads,omitempty"`
	Networks   []*spec.Network   `json:"networks,omitempty"`
	Policies   []*spec.Policy    `json:"policies,omitempty"`
	Workspaces []*spec.Workspace `json:"workspaces,omitempty"`
	// Keep names workloads the files define that this up leaves out (by
	// profile): kept as they are, not removed, as compose leaves them.
	Keep []string `json:"keep,omitempty"`
}

// ProjectChange is what an up or a down did to a project: the outcome of
// each workload applied and removed, and the networks and policies
// removed, and the named volumes removed (down --volumes), by full name
// (PROJECT.NAME).
type ProjectChange struct {
	Applied    []Result `json:"applied"`
	Removed    []Result `json:"removed"`
	Networks   []string `json:"networks,omitempty"`
	Policies   []string `json:"policies,omitempty"`
	Workspaces []string `json:"workspaces,omitempty"`
	Volumes    []string `json:"volumes,omitempty"`
	// Error is what failed of the change as a whole, after what it did.
	Error *Error `json:"error,omitempty"`
}

// Err is the change's error, nil when all of it was done.
func (c *ProjectChange) Err() error {
	if c == nil || c.Error == nil {
		return nil
	}
	return c.Error
}

// Up makes a project what docs say: what the project has and docs do not
// is removed. The change's own failure, after what it did, is its Err.
func (c *Client) Up(ctx context.Context, project string, docs Documents, o ApplyOptions) (*ProjectChange, error) {
	var out ProjectChange
	if err := c.do(ctx, "PUT", "/v1/projects/"+url.PathEscape(project), applyQuery(o), docs, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Down removes everything of a project.
func (c *Client) Down(ctx context.Context, project string, o RemoveOptions) (*ProjectChange, error) {
	q := url.Values{}
	if o.Force {
		q.Set("force", "true")
	}
	if o.Volumes {
		q.Set("volumes", "true")
	}
	var out ProjectChange
	if err := c.do(ctx, "DELETE", "/v1/projects/"+url.PathEscape(project), q, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
