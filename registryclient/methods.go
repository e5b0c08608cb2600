package registryclient

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// The routes of the contract (R7).
const (
	pathServices   = "/api/v1/services"
	pathRegister   = "/api/v1/services/register"
	pathHeartbeat  = "/api/v1/services/heartbeat"
	pathDeregister = "/api/v1/services/deregister"
	pathExport     = "/api/v1/services/export"
)

type idBody struct {
	ID string `json:"id"`
}

// Register upserts in (R2) and returns its id, and whether this call
// created it rather than refreshed it. Registering again is always safe.
func (c *Client) Register(ctx context.Context, in Instance) (id string, created bool, err error) {
	// The server stamps these; sending them would only be ignored.
	in.RegisteredAt, in.UpdatedAt = time.Time{}, time.Time{}
	var out struct {
		ID      string `json:"id"`
		Created bool   `json:"created"`
	}
	if err := c.do(ctx, "register", http.MethodPost, pathRegister, in, &out, nil); err != nil {
		return "", false, err
	}
	if out.ID == "" {
		return "", false, errors.New("registry register: malformed answer: no id")
	}
	return out.ID, out.Created, nil
}

// Heartbeat renews the lease of id (R3). ErrGone means the registry does not
// know it (any more): register again.
func (c *Client) Heartbeat(ctx context.Context, id string) error {
	return c.do(ctx, "heartbeat", http.MethodPost, pathHeartbeat, idBody{id}, nil,
		map[int]error{http.StatusGone: ErrGone})
}

// Deregister removes id (R4). ErrNotFound means it was not registered, which
// a caller shutting down may take as done.
func (c *Client) Deregister(ctx context.Context, id string) error {
	return c.do(ctx, "deregister", http.MethodPost, pathDeregister, idBody{id}, nil,
		map[int]error{http.StatusNotFound: ErrNotFound})
}

// Names returns the names of the registered services, sorted.
func (c *Client) Names(ctx context.Context) ([]string, error) {
	var out struct {
		Services *[]string `json:"services"`
	}
	if err := c.do(ctx, "list", http.MethodGet, pathServices, nil, &out, nil); err != nil {
		return nil, err
	}
	if out.Services == nil {
		return nil, errors.New("registry list: malformed answer: no services")
	}
	return *out.Services, nil
}

// Instances returns every live instance, or only the healthy ones (R6).
func (c *Client) Instances(ctx context.Context, healthyOnly bool) ([]Instance, error) {
	path := pathServices + "?detail=1"
	if healthyOnly {
		path += "&healthy_only=1"
	}
	var out struct {
		Instances *[]Instance `json:"instances"`
	}
	if err := c.do(ctx, "list", http.MethodGet, path, nil, &out, nil); err != nil {
		return nil, err
	}
	if out.Instances == nil {
		return nil, errors.New("registry list: malformed answer: no instances")
	}
	for i, in := range *out.Instances {
		if in.ID == "" || in.Name == "" {
			return nil, fmt.Errorf("registry list: malformed answer: instance %d has no id or name", i)
		}
	}
	return *out.Instances, nil
}

// Export returns the registry rendered as koder-service-ports.toml (R8).
func (c *Client) Export(ctx context.Context) (string, error) {
	var b []byte
	if err := c.do(ctx, "export", http.MethodGet, pathExport, nil, &b, nil); err != nil {
		return "", err
	}
	return string(b), nil
}
