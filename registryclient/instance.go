// Package registryclient speaks the Service Registry Contract (R1–R8): it
// registers (an idempotent upsert), heart-beats, deregisters and lists
// service instances, authenticated with an X-API-Key read from a file.
//
// It holds no schedule and no policy: when to heartbeat and what to do on
// a failure belong to the caller (the daemon's registrar).
package registryclient

import (
	"errors"
	"time"
)

// Instance is the contract's ServiceInstance (R1).
type Instance struct {
	ID           string            `json:"id,omitempty"`
	Name         string            `json:"name"`
	Address      string            `json:"address"`
	Port         int               `json:"port"`
	Protocol     string            `json:"protocol,omitempty"`
	Tags         []string          `json:"tags,omitempty"`
	Metadata     map[string]string `json:"metadata,omitempty"`
	Weight       int               `json:"weight,omitempty"`
	Priority     int               `json:"priority,omitempty"`
	Healthy      bool              `json:"healthy"`
	TTL          int64             `json:"ttl_ns,omitempty"`
	RegisteredAt time.Time         `json:"registered_at,omitzero"`
	UpdatedAt    time.Time         `json:"updated_at,omitzero"`
}

// Errors a registry answers with, told apart from transport failures (which
// wrap neither of these).
var (
	// ErrGone: the lease is unknown or expired (410); register again.
	ErrGone = errors.New("registry: instance gone")
	// ErrNotFound: deregistering an unknown instance (404).
	ErrNotFound = errors.New("registry: instance not found")
	// ErrUnauthorized: the key was refused (401 or 403). Retrying with the
	// same key cannot help.
	ErrUnauthorized = errors.New("registry: key refused")
	// ErrBadRequest: the registry refused the body (400).
	ErrBadRequest = errors.New("registry: bad request")
	// ErrConflict: the id is held by something that is not an instance
	// of this contract (409, a foreign key in a shared store). Only
	// someone clearing it can help.
	ErrConflict = errors.New("registry: the id is held by something else")
)
