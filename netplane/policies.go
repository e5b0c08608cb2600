package netplane

import (
	"fmt"
	"maps"
	"sort"
	"sync"

	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/firewall"
	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/status"
)

// SetPolicy records a policy, nil deleting it, and puts the policies in
// force; the record is kept only once they are.
func (p *Plane) SetPolicy(name string, pl *spec.Policy) error {
	if pl != nil {
		if err := pl.Validate(); err != nil {
			return err
		}
		if p.fw == nil {
			return fmt.Errorf("%w: policies are enforced with nf_tables, and this daemon has none", errdefs.ErrRuntimeUnavailable)
		}
	}
	p.docMu.Lock()
	defer p.docMu.Unlock()
	if _, ok := p.policies[name]; !ok && pl == nil {
		return fmt.Errorf("%w: no policy named %q", errdefs.ErrNotFound, name)
	}
	next := maps.Clone(p.policies)
	if pl == nil {
		delete(next, name)
	} else {
		next[name] = pl
	}
	if err := p.writeGuardsOf(next); err != nil {
		return err
	}
	if err := p.saveDoc(spec.KindPolicy, name, next[name]); err != nil {
		_ = p.writeGuardsOf(p.policies) // back to what is recorded
		return err
	}
	p.policies = next
	return nil
}

// HasPolicy says whether a policy of that name is recorded.
func (p *Plane) HasPolicy(name string) bool {
	p.docMu.Lock()
	defer p.docMu.Unlock()
	_, ok := p.policies[name]
	return ok
}

// OpenToPeers names a policy that admits the users of workload x (in
// network) that callers other than root applied (an ingress rule's
// `from: {users: true, peers: true}`), "" when none does.
func (p *Plane) OpenToPeers(x, network string) string {
	p.docMu.Lock()
	defer p.docMu.Unlock()
	if name := peersPolicy(x, network, p.policies); name != "-" {
		return name
	}
	return ""
}

// Policies is every policy with what it guards now.
func (p *Plane) Policies() []status.Policy {
	p.docMu.Lock()
	defer p.docMu.Unlock()
	pr := Project(p.policies, p.world())
	out := make([]status.Policy, 0, len(p.policies))
	for name, pl := range p.policies {
		out = append(out, status.Policy{Name: name, Spec: pl, Guards: pr.Selects[name], Problems: pr.Problems[name]})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// writeGuards puts in force the recorded policies and the endpoints'
// visibilities, for the networks and the declared workloads there are.
// Each projection reads every declaration, so the callers that ask while
// one is being written share the next: a burst of N applies projects
// about N/parallelism times instead of N.
func (p *Plane) writeGuards() error {
	return p.guards.do(func() error {
		p.docMu.Lock()
		defer p.docMu.Unlock()
		return p.writeGuardsOf(p.policies)
	})
}

// writeGuardsOf is writeGuards for policies; the caller holds docMu.
func (p *Plane) writeGuardsOf(policies map[string]*spec.Policy) error {
	if p.fw == nil {
		return nil
	}
	w := p.world()
	pr := Project(policies, w)
	if err := p.fw.SetProjection(firewall.Projection{Guards: pr.Guards, Reach: pr.Reach}); err != nil {
		return err
	}
	return p.writeReach(policies, w)
}

// coalescer runs f for its callers, one run at a time; a caller is
// answered by a run that began after it asked, so that run saw whatever
// the caller changed before asking. Callers that ask during a run share
// the one after it.
type coalescer struct {
	// mu guards the fields below, and is cond's lock; it is never held
	// while f runs, and nothing else is taken while it is held.
	mu          sync.Mutex
	cond        sync.Cond
	asked, done uint64
	runs        uint64
	busy        bool
	err         error
}

// count is how many runs there were.
func (c *coalescer) count() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.runs
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
		c.runs++
		c.cond.Broadcast()
	}
	// The last run's error: it began after this caller asked.
	return c.err
}
