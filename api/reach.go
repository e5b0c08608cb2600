package api

import (
	"context"
	"net/url"

	"github.com/flyd-dev/flyd/status"
)

// ReachEndpoint is one endpoint's derived allow-list (GET /v1/reach).
type ReachEndpoint struct {
	Workload  string `json:"workload"`
	Endpoint  string `json:"endpoint"`
	Network   string `json:"network"`
	Port      int    `json:"port"`
	Published int    `json:"published,omitempty"`
	// Declared says its network is under declared reach; when it is not,
	// every process that reaches the port is admitted.
	Declared bool           `json:"declared"`
	Admits   []ReachAdmit   `json:"admits,omitempty"`
	Refused  []ReachRefused `json:"refused,omitempty"`
}

// ReachFlyd is the entry every allow-list has beside its workloads: what
// declared reach never refuses.
const ReachFlyd = "flyd's own traffic (health checks, registry, flyd exec) and every process that is no workload of flyd's"

// ReachAdmit is an entry of an allow-list and where it comes from.
type ReachAdmit struct {
	Workload string `json:"workload"`
	Why      string `json:"why"`
	// Running says the workload has a cgroup the rules name now.
	Running bool `json:"running"`
}

// ReachRefused counts the connections one workload was refused.
type ReachRefused struct {
	Workload string `json:"workload"`
	Count    uint64 `json:"count"`
}

// Reach lists each endpoint's derived allow-list, of one workload's
// endpoints when name is not "".
func (c *Client) Reach(ctx context.Context, name string) ([]ReachEndpoint, error) {
	var q url.Values
	if name != "" {
		q = url.Values{"name": {name}}
	}
	var eps []ReachEndpoint
	return eps, c.do(ctx, "GET", "/v1/reach", q, nil, &eps)
}

// ReachEndpoints converts the supervisor's allow-lists to the wire.
func ReachEndpoints(in []status.ReachEndpoint) []ReachEndpoint {
	out := make([]ReachEndpoint, len(in))
	for i, e := range in {
		r := ReachEndpoint{Workload: e.Workload, Endpoint: e.Endpoint, Network: e.Network, Port: e.Port, Published: e.Published, Declared: e.Declared}
		for _, a := range e.Admits {
			r.Admits = append(r.Admits, ReachAdmit{Workload: a.Workload, Why: a.Why, Running: a.Running})
		}
		for _, f := range e.Refused {
			r.Refused = append(r.Refused, ReachRefused{Workload: f.Workload, Count: f.Count})
		}
		out[i] = r
	}
	return out
}
