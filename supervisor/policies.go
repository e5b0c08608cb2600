package supervisor

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"sync"

	"github.com/flyd-dev/flyd/atomicfile"
	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/firewall"
	"github.com/flyd-dev/flyd/netplane"
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
	pr := netplane.Project(policies, s.world())
	return s.cfg.Firewall.SetProjection(firewall.Projection{Guards: pr.Guards, Reach: pr.Reach})
}

// policyList is every policy with what it guards now.
func (s *Supervisor) policyList() []status.Policy {
	s.docMu.Lock()
	defer s.docMu.Unlock()
	pr := netplane.Project(s.policies, s.world())
	out := make([]status.Policy, 0, len(s.policies))
	for name, p := range s.policies {
		out = append(out, status.Policy{Name: name, Spec: p, Guards: pr.Selects[name], Problems: pr.Problems[name]})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
