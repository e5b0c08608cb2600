package netplane

import (
	"cmp"
	"fmt"
	"path/filepath"
	"slices"

	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/firewall"
	"github.com/flyd-dev/flyd/netalloc"
	"github.com/flyd-dev/flyd/sandbox"
	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/status"
)

// allowNetwork writes a linked network's rules: its way out through the
// host, and nothing to other networks.
func (p *Plane) allowNetwork(name string, l *sandbox.Link) error {
	if p.fw == nil {
		return nil
	}
	if changed, err := firewall.Forwarding(); err != nil {
		return err
	} else if changed {
		p.log.Info("turned on IPv4 forwarding (net.ipv4.ip_forward=1): a network's traffic goes out through the host")
	}
	return p.setRules(name, l)
}

// setRules computes network's rules and writes them, as one (rulesMu).
func (p *Plane) setRules(network string, l *sandbox.Link) error {
	p.rulesMu.Lock()
	defer p.rulesMu.Unlock()
	n := p.rulesOf(network, l)
	p.drainConnect(network, n)
	if err := p.fw.Set(network, n); err != nil {
		return fmt.Errorf("network %s: %w", network, err)
	}
	p.setConnect(network, &n)
	return nil
}

// forgetLink drops a deleted network's link and rules.
func (p *Plane) forgetLink(name string) {
	p.linkMu.Lock()
	delete(p.links, name)
	p.linkMu.Unlock()
	if p.fw != nil {
		p.setConnect(name, nil)
		if err := p.fw.Remove(name); err != nil {
			p.log.Warn("cannot remove a network's rules", zap.String("network", name), zap.Error(err))
		}
		p.rewriteGuards()
	}
}

// rewriteGuards puts the policies in force again after a change that
// cannot fail for it (a network or workload gone), saying so if it does.
func (p *Plane) rewriteGuards() {
	if err := p.writeGuards(); err != nil {
		p.log.Warn("cannot put the policies in force", zap.Error(err))
	}
}

// syncLinks, at start, learns the links of the networks that are left and
// rewrites the firewall for exactly those, replacing what a crash left.
func (p *Plane) syncLinks() {
	if err := p.nets.SweepLinks(); err != nil {
		p.log.Warn("cannot sweep network links", zap.Error(err))
	}
	links, err := p.nets.Links()
	if err != nil {
		p.log.Warn("cannot list network links", zap.Error(err))
		return
	}
	nets := map[string]firewall.Net{}
	p.linkMu.Lock()
	for name, l := range links {
		if !l.Subnet.IsValid() {
			continue // half made: the next Ensure of the network remakes it
		}
		p.links[name] = l
		nets[name] = p.rulesOf(name, l)
	}
	p.linkMu.Unlock()
	if p.fw == nil {
		return
	}
	if err := p.fw.Sync(nets); err != nil {
		p.log.Warn("cannot write the networks' rules", zap.Error(err))
		return
	}
	for name, n := range nets {
		p.setConnect(name, &n)
	}
}

// WriteRules rewrites a linked network's rules from its document and what
// its workloads hold: their published ports, and the ports they serve.
func (p *Plane) WriteRules(network string) error {
	l := p.Link(network)
	if l == nil || p.fw == nil {
		return nil
	}
	return p.setRules(network, l)
}

// publishedIn lists a network's published ports, by host port.
func (p *Plane) publishedIn(network string) []status.Published {
	// Inner ports by their published ports' holder: a replica's are its
	// group's.
	groupOf, groups := p.groupsNow()
	inner := map[[2]string][]netalloc.Reservation{}
	for _, r := range p.ports.In(network) {
		if groups[r.Workload] {
			continue // the group's own port in its network
		}
		k := [2]string{cmp.Or(groupOf[r.Workload], r.Workload), r.Endpoint}
		inner[k] = append(inner[k], r)
	}
	var out []status.Published
	for _, r := range p.ports.In(spec.NetworkHost) {
		for _, in := range inner[[2]string{r.Workload, r.Endpoint}] {
			out = append(out, status.Published{HostPort: r.Port, Port: in.Port, Workload: in.Workload, Endpoint: r.Endpoint})
		}
	}
	slices.SortFunc(out, func(a, b status.Published) int { return cmp.Or(a.HostPort-b.HostPort, a.Port-b.Port) })
	return out
}

// rulesOf is a network as the firewall sees it.
func (p *Plane) rulesOf(network string, l *sandbox.Link) firewall.Net {
	n := firewall.Net{Link: l.Name, Subnet: l.Subnet, Inner: l.Inner, Egress: p.Doc(network).AllowsEgress(),
		NS: filepath.Join(p.nets.Dir(), network)}
	balance := p.balance(network)
	groupOf, groups := p.groupsNow()
	for _, r := range p.ports.In(network) {
		if groups[r.Workload] {
			n.Groups = append(n.Groups, firewall.Forward{HostPort: r.Port, Balance: balance[[2]string{r.Workload, r.Endpoint}]})
			continue
		}
		n.Served = append(n.Served, r.Port)
	}
	for _, pub := range p.publishedIn(network) {
		f := firewall.Forward{HostPort: pub.HostPort, Port: pub.Port, Exposed: p.exposed(pub.Workload, pub.Endpoint)}
		if i := len(n.Published) - 1; i >= 0 && n.Published[i].HostPort == f.HostPort {
			continue // a group's: one forward, balanced
		}
		if b := balance[[2]string{groupOf[pub.Workload], pub.Endpoint}]; len(b) > 0 {
			f.Port, f.Balance = b[0], b
		}
		n.Published = append(n.Published, f)
	}
	return n
}
