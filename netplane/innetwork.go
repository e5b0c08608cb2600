package netplane

// InNetwork names the workloads declared in network, each with the group
// it is a replica of ("" for none): those a run of the network finds by
// name in its /etc/hosts (package mounts). It only reads.
func (p *Plane) InNetwork(network string) map[string]string {
	p.declMu.Lock()
	defer p.declMu.Unlock()
	out := map[string]string{}
	for name, d := range p.decls {
		if d.Network == network {
			out[name] = d.Group
		}
	}
	return out
}
