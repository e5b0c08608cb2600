package netplane

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/status"
)

// Address is what a consumer is given of producer's endpoint m, as
// codefly gives it: a URL for an HTTP-based API (http://host:port, or an
// external endpoint's own), host:port otherwise. The address is the one
// that reaches it from where the consumer runs: its own network's (container) address when they share one, the
// host's when the consumer is on the host (native), and across networks
// the consumer's gateway to the host at the endpoint's host port
// (published, or a host network's endpoint listening on the host's
// addresses). Two isolated networks are walled apart: an endpoint of one
// that is not published cannot be reached from another.
func (p *Plane) Address(consumer, producer *spec.Workload, m status.PortMapping) (string, error) {
	if err := Permitted(consumer, producer, m.Endpoint); err != nil {
		return "", err
	}
	if m.Location == spec.LocationExternal {
		// Outside the system: reached the way out, which a network
		// without egress has not.
		if consumer.Network != spec.NetworkHost && !p.Doc(consumer.Network).AllowsEgress() {
			return "", fmt.Errorf("endpoint %s of %s is external (%s), and network %s has no way out (egress: false)", m.Endpoint, producer.Name, m.Address("native"), consumer.Network)
		}
		return m.Address("native"), nil
	}
	addr, err := p.reach(consumer, producer, m)
	if err != nil || !spec.HTTPBased(m.API) {
		return addr, err
	}
	return "http://" + addr, nil
}

// Placeholder stands in for Address before ports are assigned, for the
// measurements at apply: as long as any address it could be, or an
// external endpoint's own.
func Placeholder(m status.PortMapping) string {
	switch {
	case m.Location == spec.LocationExternal:
		return m.Address("native")
	case spec.HTTPBased(m.API):
		return "http://255.255.255.255:65535"
	}
	return "255.255.255.255:65535"
}

// Authority is an address without its URL's scheme: host:port.
func Authority(addr string) string {
	if _, rest, ok := strings.Cut(addr, "://"); ok {
		return rest
	}
	return addr
}

// reach is host:port of m from where consumer runs.
func (p *Plane) reach(consumer, producer *spec.Workload, m status.PortMapping) (string, error) {
	switch {
	case producer.ReplicaOf != "" && producer.Network != spec.NetworkHost && p.groupPort(producer.ReplicaOf, producer.Network, m.Endpoint) != 0 &&
		(consumer.Network == producer.Network || consumer.Network == spec.NetworkHost && m.Published == 0):
		// A group's own port, balanced across its replicas: at loopback
		// from their network, at the network's address from the host.
		gp := strconv.Itoa(p.groupPort(producer.ReplicaOf, producer.Network, m.Endpoint))
		if consumer.Network == producer.Network {
			return net.JoinHostPort("localhost", gp), nil
		}
		if a := p.InnerAddress(producer.Network); a != "" {
			return net.JoinHostPort(a, gp), nil
		}
		return m.Address("native"), nil
	case consumer.Network == producer.Network:
		return m.Address("container"), nil
	case consumer.Network == spec.NetworkHost:
		return m.Address("native"), nil
	}
	hostPort := m.Published
	if producer.Network == spec.NetworkHost {
		hostPort = m.Port
	}
	l := p.Link(consumer.Network)
	switch {
	case hostPort == 0:
		return "", fmt.Errorf("endpoint %s of %s, in network %s, is not published, and network %s cannot reach it", m.Endpoint, producer.Name, producer.Network, consumer.Network)
	case l == nil:
		return "", fmt.Errorf("network %s has no link to the host (--network-pool off), so %s's endpoint %s is out of its reach", consumer.Network, producer.Name, m.Endpoint)
	}
	return net.JoinHostPort(l.Host.String(), strconv.Itoa(hostPort)), nil
}

// Permitted refuses a consumer an endpoint of producer that its
// visibility keeps from it: a private one of another module.
func Permitted(consumer, producer *spec.Workload, endpoint string) error {
	for _, e := range producer.Endpoints {
		if e.Name == endpoint && e.Reach() == spec.VisibilityPrivate && ModuleKey(consumer) != ModuleKey(producer) {
			return fmt.Errorf("endpoint %s of %s is private to module %q, and %s is of module %q", endpoint, producer.Name, moduleOf(producer), consumer.Name, moduleOf(consumer))
		}
	}
	return nil
}

func moduleOf(w *spec.Workload) string {
	if w.Identity == nil {
		return ""
	}
	return w.Identity.Module
}

// ModuleKey is what private visibility compares: the module within its
// workspace, so that a module of the same name in another workspace (a
// caller other than root works in its own) is another module. Empty
// without a module.
func ModuleKey(w *spec.Workload) string {
	if m := moduleOf(w); m != "" {
		return w.Identified().Workspace + "/" + m
	}
	return ""
}
