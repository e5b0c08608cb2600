package registrar

import (
	"cmp"
	"maps"
	"os"
	"sort"

	"github.com/flyd-dev/flyd/registryclient"
	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/status"
)

// Host is what an instance says of the host that serves it.
type Host struct {
	// Name names the host in instance ids and metadata.
	Name string
	// Advertise is the address other hosts reach an exposed endpoint on.
	Advertise string
	// Inner is the address the host reaches a workload of network on;
	// "" for loopback (an island).
	Inner func(network string) string
}

// ThisHost is the host the daemon runs on as its instances say it: named
// by its hostname ("localhost" when it has none), reached by other hosts
// at advertise, and reaching a workload of a network at inner(network).
func ThisHost(advertise string, inner func(network string) string) Host {
	name, err := os.Hostname()
	if err != nil || name == "" {
		name = "localhost"
	}
	return Host{Name: name, Advertise: advertise, Inner: inner}
}

// Instances is what the registry is given of a running workload's
// endpoints: an instance an endpoint this host serves, named by the
// spec's registry section or the workload (a replica by its group: they
// are one service), at the address this host reaches it on (the
// advertised one when exposed, the published port on loopback), with the
// contract's labels. Whether the workload runs, and how healthy, is its
// supervisor's to say.
func Instances(w *spec.Workload, ports []status.PortMapping, healthy bool, host Host) []registryclient.Instance {
	name, ttl := cmp.Or(w.ReplicaOf, w.Name), int64(defaultTTL)
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
		maps.Copy(meta, r.Metadata)
	}
	out := make([]registryclient.Instance, 0, len(ports))
	for _, p := range ports {
		if p.Location == spec.LocationExternal {
			continue // not this host's to announce
		}
		address, port := "127.0.0.1", p.Port
		switch {
		case p.Address("public") != "":
			// Exposed: its address beyond the host, whoever looks.
			address, port = host.Advertise, cmp.Or(p.Published, p.Port)
		case p.Published != 0:
			// Published on the host's loopback, for this host's own.
			port = p.Published
		case p.Network != spec.NetworkHost:
			// The address the host reaches it on: its network's own, or
			// loopback for an island.
			if a := host.Inner(p.Network); a != "" {
				address = a
			}
		}
		md := map[string]string{
			// The contract's topology labels (R5): the unit that runs it
			// and the service it is.
			"container": w.Name,
			"service":   w.Identified().Service,
		}
		maps.Copy(md, meta)
		// flyd's own labels are never the spec's to say: the next daemon
		// judges by them what it left registered.
		maps.Copy(md, map[string]string{
			"flyd.workload": w.Name,
			"flyd.endpoint": p.Endpoint,
			"flyd.api":      p.API,
			"flyd.host":     host.Name,
			"flyd.kind":     string(w.Kind),
			"flyd.network":  p.Network,
		})
		it := append([]string{"api=" + p.API}, tags...)
		sort.Strings(it[1:])
		out = append(out, registryclient.Instance{
			ID:       "flyd-" + host.Name + "-" + w.Name + "-" + p.Endpoint,
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
