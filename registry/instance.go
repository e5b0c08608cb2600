package registry

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Defaults of the contract (R1, R3).
const (
	DefaultTTL          = 90 * time.Second
	DefaultReapInterval = 30 * time.Second
	DefaultWeight       = 100
	DefaultPriority     = 10
	DefaultProtocol     = "tcp"
)

// Instance is the contract's ServiceInstance (R1) as the registry stores and
// serves it. TTL is the effective lease in nanoseconds: the registrant's, or
// the registry default it got; 0 means the lease never expires.
//
// It is the server's own type, not registryclient's: the two ends agree on
// the wire only, and the client's tests run against this server so that
// they cannot drift.
type Instance struct {
	ID           string            `json:"id"`
	Name         string            `json:"name"`
	Address      string            `json:"address"`
	Port         int               `json:"port"`
	Protocol     string            `json:"protocol"`
	Tags         []string          `json:"tags"`
	Metadata     map[string]string `json:"metadata"`
	Weight       int               `json:"weight"`
	Priority     int               `json:"priority"`
	Healthy      bool              `json:"healthy"`
	TTL          int64             `json:"ttl_ns"`
	RegisteredAt time.Time         `json:"registered_at"`
	UpdatedAt    time.Time         `json:"updated_at"`
}

// expired tells whether the lease has passed at now.
func (in *Instance) expired(now time.Time) bool {
	return in.TTL > 0 && now.After(in.UpdatedAt.Add(time.Duration(in.TTL)))
}

// Domain is the public vhost the instance opted into edge routing with
// (R5): metadata jet.domain, else a jet.domain=<host> tag; "" when it is
// internal-only.
func (in *Instance) Domain() string { return in.label("jet.domain") }

// label reads a topology label from metadata first, then from a key=value
// tag, as R5 allows both.
func (in *Instance) label(key string) string {
	if v := in.Metadata[key]; v != "" {
		return v
	}
	for _, t := range in.Tags {
		if k, v, ok := strings.Cut(t, "="); ok && k == key && v != "" {
			return v
		}
	}
	return ""
}

// registration is a register request body. Healthy is a pointer so that a
// registrant that says nothing about health is taken as healthy: it is
// alive, since it is registering. registered_at and updated_at are accepted
// (a client may echo an instance back) and ignored: the server stamps them.
type registration struct {
	ID           string            `json:"id"`
	Name         string            `json:"name"`
	Address      string            `json:"address"`
	Port         int               `json:"port"`
	Protocol     string            `json:"protocol"`
	Tags         []string          `json:"tags"`
	Metadata     map[string]string `json:"metadata"`
	Weight       int               `json:"weight"`
	Priority     int               `json:"priority"`
	Healthy      *bool             `json:"healthy"`
	TTL          int64             `json:"ttl_ns"`
	RegisteredAt *time.Time        `json:"registered_at"`
	UpdatedAt    *time.Time        `json:"updated_at"`
}

// instance validates r (R2) and applies the defaults (R1, R3). The error
// names the field, for the 400 answer.
func (r *registration) instance(defaultTTL time.Duration) (Instance, error) {
	name, addr := strings.TrimSpace(r.Name), strings.TrimSpace(r.Address)
	switch {
	case name == "":
		return Instance{}, fmt.Errorf("name is required")
	case addr == "":
		return Instance{}, fmt.Errorf("address is required")
	case r.Port == 0:
		return Instance{}, fmt.Errorf("port is required and must not be 0")
	case r.Port < 0 || r.Port > 65535:
		return Instance{}, fmt.Errorf("port %d is out of range 1-65535", r.Port)
	case r.Weight < 0 || r.Weight > 65535:
		return Instance{}, fmt.Errorf("weight %d is out of range 0-65535", r.Weight)
	case r.Priority < 0 || r.Priority > 65535:
		return Instance{}, fmt.Errorf("priority %d is out of range 0-65535", r.Priority)
	}
	in := Instance{
		ID:       strings.TrimSpace(r.ID),
		Name:     name,
		Address:  addr,
		Port:     r.Port,
		Protocol: strings.ToLower(strings.TrimSpace(r.Protocol)),
		Tags:     r.Tags,
		Metadata: r.Metadata,
		Weight:   r.Weight,
		Priority: r.Priority,
		Healthy:  r.Healthy == nil || *r.Healthy,
		TTL:      r.TTL,
	}
	if in.ID == "" {
		in.ID = name + "-" + addr + "-" + strconv.Itoa(r.Port)
	}
	if in.Protocol == "" {
		in.Protocol = DefaultProtocol
	}
	if in.Weight == 0 {
		in.Weight = DefaultWeight
	}
	if in.Priority == 0 {
		in.Priority = DefaultPriority
	}
	if in.TTL <= 0 {
		in.TTL = int64(defaultTTL)
	}
	// Empty rather than null on the wire: consumers iterate without a check.
	if in.Tags == nil {
		in.Tags = []string{}
	}
	if in.Metadata == nil {
		in.Metadata = map[string]string{}
	}
	return in, nil
}
