package supervisor

import (
	"cmp"
	"sort"

	"github.com/flyd-dev/flyd/registryclient"
	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/status"
)

// defaultRegistryTTL is an instance's lease when the spec names none.
const defaultRegistryTTL = 30_000_000_000 // 30 s in ns

// instances is what the registry should hold for a workload in a state:
// one instance per endpoint while it runs, nothing otherwise.
func (s *Supervisor) instances(w *spec.Workload, ports []status.PortMapping, st status.State) []registryclient.Instance {
	if st != status.Running || len(ports) == 0 {
		return nil
	}
	// Replicas are instances of their group's one service.
	name, ttl := cmp.Or(w.ReplicaOf, w.Name), int64(defaultRegistryTTL)
	var tags []string
	meta := map[string]string{}
	if r := w.Registry; r != nil {
		if r.Name != "" {
			name = r.Name
		}
		if r.TTL.Duration > 0 {
			ttl = int64(r.TTL.Duration)
		}
		tags = r.Tags
		for k, v := range r.Metadata {
			meta[k] = v
		}
	}
	// Healthy without a check; with one, only once it has passed.
	healthy := w.Health == nil || (s.healthOf(w.Name))
	out := make([]registryclient.Instance, 0, len(ports))
	for _, p := range ports {
		if p.Location == spec.LocationExternal {
			continue // not this host's to announce
		}
		address, port := "127.0.0.1", p.Port
		switch {
		case p.Address("public") != "":
			// Exposed: its address beyond the host, whoever looks.
			address, port = s.cfg.AdvertiseAddress, cmp.Or(p.Published, p.Port)
		case p.Published != 0:
			// Published on the host's loopback, for this host's own.
			port = p.Published
		case p.Network != spec.NetworkHost:
			// The address the host reaches it on: its network's own, or
			// loopback for an island.
			if l := s.net.Link(p.Network); l != nil {
				address = l.Inner.String()
			}
		}
		md := map[string]string{
			// The contract's topology labels (R5): the unit that runs it
			// and the service it is.
			"container":     w.Name,
			"service":       w.Identified().Service,
			"flyd.workload": w.Name,
			"flyd.endpoint": p.Endpoint,
			"flyd.api":      p.API,
			"flyd.host":     s.hostname,
			"flyd.kind":     string(w.Kind),
			"flyd.network":  p.Network,
		}
		for k, v := range meta {
			md[k] = v
		}
		it := append([]string{"api=" + p.API}, tags...)
		sort.Strings(it[1:])
		out = append(out, registryclient.Instance{
			ID:       "flyd-" + s.hostname + "-" + w.Name + "-" + p.Endpoint,
			Name:     name,
			Address:  address,
			Port:     port,
			Protocol: "tcp",
			Tags:     it,
			Metadata: md,
			Healthy:  healthy,
			TTL:      ttl,
		})
	}
	return out
}

// publishInstances tells the registrar what the workload should have
// registered now. It never blocks on the registry.
func (w *workload) publishInstances(st status.State) {
	if w.group != "" {
		// A replica takes connections of its group's published ports
		// when it would be announced healthy.
		w.s.net.Serving(w.name, st == status.Running && (w.spec.Health == nil || w.s.healthOf(w.name)))
	}
	if w.s.cfg.Registrar == nil {
		return
	}
	w.s.cfg.Registrar.Set(w.name, w.s.instances(w.spec, w.ports, st))
}

// RegistryProblem reports a registration that fails, or recovers (err nil),
// as an event. The registrar calls it; it must not block.
func (s *Supervisor) RegistryProblem(owner, id string, err error) {
	ev := status.Event{Type: status.EventRegistry, Workload: owner, Message: id + " registered again"}
	if err != nil {
		ev.Message = id + ": " + err.Error()
	}
	s.publish(ev)
}

// healthOf is the last verdict of a workload's health check.
func (s *Supervisor) healthOf(name string) bool {
	w, err := s.lookup(name)
	if err != nil {
		return false
	}
	v := w.snapshot(false)
	return v.Healthy != nil && *v.Healthy
}
