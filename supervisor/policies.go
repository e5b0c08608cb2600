package supervisor

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"sort"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/flyd-dev/flyd/atomicfile"
	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/firewall"
	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/status"
)

// policiesFile holds the policy documents under the state dir: desired
// state, as workloads and network documents are.
const policiesFile = "policies.json"

// loadPolicies reads the policies an earlier daemon recorded.
func (s *Supervisor) loadPolicies() {
	docs := loadDocs[spec.Policy](s, policiesFile, "the policies; none is in force until one is applied", func(p *spec.Policy) string { return p.Name })
	s.docMu.Lock()
	defer s.docMu.Unlock()
	s.policies = docs
}

// setPolicy records a policy, nil deleting it, and puts the policies in
// force; the record is kept only once they are.
func (s *Supervisor) setPolicy(name string, p *spec.Policy) error {
	if p != nil {
		if err := p.Validate(); err != nil {
			return err
		}
		if s.cfg.Firewall == nil {
			return fmt.Errorf("%w: policies are enforced with nf_tables, and this daemon has none", errdefs.ErrRuntimeUnavailable)
		}
	}
	s.docMu.Lock()
	defer s.docMu.Unlock()
	if _, ok := s.policies[name]; !ok && p == nil {
		return fmt.Errorf("%w: no policy named %q", errdefs.ErrNotFound, name)
	}
	next := make(map[string]*spec.Policy, len(s.policies)+1)
	for k, v := range s.policies {
		next[k] = v
	}
	if p == nil {
		delete(next, name)
	} else {
		next[name] = p
	}
	b, err := json.Marshal(next)
	if err != nil {
		return err
	}
	if err := s.writeGuardsOf(next); err != nil {
		return err
	}
	if err := atomicfile.Write(filepath.Join(s.cfg.StateDir, policiesFile), b, 0o600); err != nil {
		_ = s.writeGuardsOf(s.policies) // back to what is recorded
		return fmt.Errorf("cannot record the policies: %w", err)
	}
	s.policies = next
	return nil
}

// writeGuards puts in force the recorded policies and the endpoints'
// visibilities, for the networks and the declared workloads there are.
// Each projection reads every declaration, so the callers that ask while
// one is being written share the next: a burst of N applies projects
// about N/batchParallel times instead of N.
func (s *Supervisor) writeGuards() error {
	return s.guards.do(func() error {
		s.docMu.Lock()
		defer s.docMu.Unlock()
		return s.writeGuardsOf(s.policies)
	})
}

// coalescer runs f for its callers, one run at a time; a caller is
// answered by a run that began after it asked, so that run saw whatever
// the caller changed before asking. Callers that ask during a run share
// the one after it.
type coalescer struct {
	mu          sync.Mutex
	cond        sync.Cond
	asked, done uint64
	busy        bool
	err         error
}

// failed says whether the last run failed.
func (c *coalescer) failed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err != nil
}

func (c *coalescer) do(f func() error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cond.L == nil {
		c.cond.L = &c.mu
	}
	c.asked++
	mine := c.asked
	for c.done < mine {
		if c.busy {
			c.cond.Wait()
			continue
		}
		c.busy = true
		covers := c.asked
		c.mu.Unlock()
		err := f()
		c.mu.Lock()
		c.busy, c.done, c.err = false, covers, err
		c.cond.Broadcast()
	}
	// The last run's error: it began after this caller asked.
	return c.err
}

// writeGuardsOf is writeGuards for policies; the caller holds docMu.
func (s *Supervisor) writeGuardsOf(policies map[string]*spec.Policy) error {
	if s.cfg.Firewall == nil {
		return nil
	}
	pr := project(policies, s.world())
	return s.cfg.Firewall.SetProjection(firewall.Projection{Guards: pr.guards, Reach: pr.reach})
}

// projection is what the policies and visibilities come to: a guard per
// network the policies select, the ports visibilities guard, and what
// each policy could not put in force.
type projection struct {
	guards   []firewall.Guard
	reach    []firewall.Reach
	selects  map[string][]string // policy → the networks it guards
	problems map[string][]string // policy → why some of it is not enforced
}

// project projects policies onto the networks: a policy guards the
// networks it names and those of the workloads it names; its peers are
// networks by their links and workloads by their networks'. A name of
// nothing (yet) or of a workload on the host's network is left out, and
// said so. It is a pure function of its arguments.
func project(policies map[string]*spec.Policy, w world) projection {
	networkOf := map[string]string{}
	for name, d := range w.decls {
		networkOf[name] = d.network
	}
	links := w.links
	pr := projection{selects: map[string][]string{}, problems: map[string][]string{}, reach: reachRules(w)}
	say := func(policy, format string, args ...any) {
		pr.problems[policy] = append(pr.problems[policy], fmt.Sprintf(format, args...))
	}
	// networks resolves workloads and networks to the links of the
	// networks they are: what packets carry.
	networks := func(policy, field string, workloads, nets []string) []string {
		var out []string
		for _, w := range workloads {
			n, ok := networkOf[w]
			switch {
			case !ok:
				say(policy, "%s: no workload named %s (yet)", field, w)
			case n == spec.NetworkHost:
				say(policy, "%s: %s is on the host's network, which no policy can tell apart from the host", field, w)
			default:
				nets = append(nets, n)
			}
		}
		for _, n := range nets {
			if l, ok := links[n]; ok {
				out = append(out, l)
			} else {
				say(policy, "%s: network %s does not exist (yet)", field, n)
			}
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	byLink := map[string]*firewall.Guard{}
	names := make([]string, 0, len(policies))
	for n := range policies {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		p := policies[name]
		selected := networks(name, "select", p.Select.Workloads, p.Select.Networks)
		for _, l := range selected {
			g := byLink[l]
			if g == nil {
				g = &firewall.Guard{Link: l}
				byLink[l] = g
			}
			if p.Ingress != nil {
				g.Ingress = addAllows(g.Ingress)
				for i, r := range *p.Ingress {
					// A rule of `users` alone names no peer of its own: its
					// allows are the users'.
					if a := allowOf(name, networks(name, fmt.Sprintf("ingress[%d].from", i), r.From.Workloads, r.From.Networks), r.From.CIDRs, r.Ports); len(a.Links)+len(a.CIDRs) > 0 || !r.From.Users {
						*g.Ingress = append(*g.Ingress, a)
					}
					if r.From.Users {
						*g.Ingress = append(*g.Ingress, usersOf(name, p.Select, l, r.Ports, r.From.Peers, w)...)
					}
				}
			}
			if p.Egress != nil {
				g.Egress = addAllows(g.Egress)
				for i, r := range *p.Egress {
					*g.Egress = append(*g.Egress, allowOf(name, networks(name, fmt.Sprintf("egress[%d].to", i), r.To.Workloads, r.To.Networks), r.To.CIDRs, r.Ports))
				}
			}
		}
		for _, l := range selected {
			for n, nl := range links {
				if nl == l {
					pr.selects[name] = append(pr.selects[name], n)
				}
			}
		}
		sort.Strings(pr.selects[name])
		slices.Sort(pr.problems[name])
		pr.problems[name] = slices.Compact(pr.problems[name])
	}
	ls := make([]string, 0, len(byLink))
	for l := range byLink {
		ls = append(ls, l)
	}
	sort.Strings(ls)
	for _, l := range ls {
		pr.guards = append(pr.guards, *byLink[l])
	}
	return pr
}

// addAllows is a guarded direction's allows, made when it is the first
// policy to guard it.
func addAllows(a *[]firewall.Allow) *[]firewall.Allow {
	if a == nil {
		a = &[]firewall.Allow{}
	}
	return a
}

func allowOf(policy string, links, cidrs []string, ports []spec.PolicyPort) firewall.Allow {
	a := firewall.Allow{Policy: policy, Links: links}
	for _, c := range cidrs {
		a.CIDRs = append(a.CIDRs, netip.MustParsePrefix(c)) // validated
	}
	for _, p := range ports {
		proto := map[string]uint8{spec.ProtocolTCP: unix.IPPROTO_TCP, spec.ProtocolUDP: unix.IPPROTO_UDP, spec.ProtocolICMP: unix.IPPROTO_ICMP}[p.Proto()]
		a.Ports = append(a.Ports, firewall.Port{Proto: proto, Port: p.Port})
	}
	return a
}

// policyList is every policy with what it guards now.
func (s *Supervisor) policyList() []status.Policy {
	s.docMu.Lock()
	defer s.docMu.Unlock()
	pr := project(s.policies, s.world())
	out := make([]status.Policy, 0, len(s.policies))
	for name, p := range s.policies {
		out = append(out, status.Policy{Name: name, Spec: p, Guards: pr.selects[name], Problems: pr.problems[name]})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
