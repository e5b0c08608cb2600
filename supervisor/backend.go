package supervisor

// This file and backend_batch.go are the supervisor as an api.Backend: they take
// the API's requests and answer in its types, converting the
// supervisor's status (package status). Nothing else in the package
// knows the wire.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/flyd-dev/flyd/api"
	"github.com/flyd-dev/flyd/driver"
	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/logfile"
	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/status"
)

func (s *Supervisor) Status(ctx context.Context) (*api.Status, error) {
	st := &api.Status{
		Version:   s.cfg.Version,
		PID:       os.Getpid(),
		StartedAt: s.started,
		Uptime:    time.Since(s.started).Round(time.Second).String(),
		States:    map[api.State]int{},
		Runtimes:  map[string]bool{},
		Registry:  api.RegistryStatus{URL: s.cfg.RegistryURL, KeyFile: s.cfg.RegistryKeyFile},
		LastEvent: s.events.last(),
	}
	if r := s.cfg.Registrar; r != nil {
		rs := r.Stats()
		st.Registry.Desired, st.Registry.Registered, st.Registry.Failing = rs.Desired, rs.Registered, rs.Failing
		st.Registry.Heartbeats, st.Registry.Failures, st.Registry.LastError = rs.Heartbeats, rs.Failures, rs.LastError
	}
	for _, k := range spec.Kinds {
		st.Runtimes[string(k)] = s.runtime(ctx, k) == nil
	}
	for _, p := range s.fileProblemList() {
		st.FileProblems = append(st.FileProblems, api.FromFileProblem(p))
	}
	for _, q := range s.quarantinedList() {
		st.Quarantined = append(st.Quarantined, api.FromQuarantined(q))
	}
	for _, w := range s.all() {
		st.Workloads++
		st.States[w.snapshot(false).State]++
	}
	return st, nil
}

// runtime says whether workloads of kind k can start now.
func (s *Supervisor) runtime(ctx context.Context, k spec.Kind) error {
	d := s.drivers[k]
	if d == nil {
		return fmt.Errorf("%w: this daemon has no %s runtime", errdefs.ErrRuntimeUnavailable, k)
	}
	if p, ok := d.(driver.Prober); ok {
		return p.Available(ctx)
	}
	return nil
}

func (s *Supervisor) List(ctx context.Context) ([]api.Workload, error) {
	ws := s.all()
	out := make([]api.Workload, 0, len(ws))
	for _, w := range ws {
		out = append(out, api.FromWorkload(w.snapshot(false)))
	}
	return out, nil
}

func (s *Supervisor) Get(ctx context.Context, name string) (*api.Workload, error) {
	w, err := s.lookup(name)
	if err != nil {
		return nil, err
	}
	return wire(w.snapshot(true), nil)
}

var _ api.Backend = (*Supervisor)(nil)

// wire is a workload's status, with the outcome of a command on it, as
// the API answers them.
func wire(v status.Workload, err error) (*api.Workload, error) {
	out := api.FromWorkload(v)
	return &out, err
}

// wireResult is wire for a command whose answer may have no workload.
func wireResult(v *status.Workload, err error) (*api.Workload, error) {
	if v == nil {
		return nil, err
	}
	return wire(*v, err)
}

// Put applies a spec as the API does: Apply without owner or force.
func (s *Supervisor) Put(ctx context.Context, sp *spec.Workload, start bool) (*api.Workload, error) {
	return s.Apply(ctx, sp, api.ApplyOptions{Start: start})
}

func (s *Supervisor) Apply(ctx context.Context, sp *spec.Workload, o api.ApplyOptions) (*api.Workload, error) {
	sp = sp.Clone()
	sp.SetDefaults()
	if err := sp.Validate(); err != nil {
		return nil, err
	}
	if err := s.runtime(ctx, sp.Kind); err != nil {
		return nil, err
	}
	if sp.Resources != nil && s.cfg.Cgroups == nil {
		return nil, fmt.Errorf("%w: resources need cgroups, and this host gives flyd none", errdefs.ErrRuntimeUnavailable)
	}
	if err := s.checkAfter(sp); err != nil {
		return nil, err
	}
	if w, err := s.lookup(sp.Name); err == nil {
		v := w.snapshot(false)
		if err := ownedBy(sp.Name, v.Owner, o.Owner, o.Force); err != nil {
			return nil, err
		}
		if err := confinedTo(sp.Name, v.AppliedBy, o.By, o.Confined); err != nil {
			return nil, err
		}
	}
	if o.Confined {
		if err := s.laneOf(sp, o.By); err != nil {
			return nil, err
		}
	}
	// Checked before any port is taken: a spec the kernel would refuse
	// must not hold a port. Port placeholders are as long as real ports.
	used, err := s.usedEndpoints(sp, true)
	if err != nil {
		return nil, err
	}
	resolved, err := s.withReferences(sp, true)
	if err != nil {
		return nil, err
	}
	if pl, err := makePlan(resolved, placeholderPorts(sp), used); err != nil {
		return nil, err
	} else if err := pl.check(s.carrierDir(sp.Name)); err != nil {
		return nil, err
	}
	// A quarantined record of the name is replaced; its run ends first.
	q, release, err := s.claimQuarantine(ctx, sp.Name, o.Owner, o.Force)
	if err != nil {
		return nil, err
	}
	defer release()
	if q != nil {
		s.releaseElsewhere(sp.Name, sp.Network)
	}
	for {
		// Assigned on each pass: a workload removed meanwhile, or whose
		// create failed, released what the last pass took.
		ports, err := s.assign(ctx, sp)
		if err != nil {
			return nil, err
		}
		w, created := s.register(sp, ports, status.Pending, func(w *workload) { w.createErr = w.create(o.Start, o.Owner, o.By) })
		if created {
			s.publish(status.Event{Type: status.EventApplied, Workload: sp.Name, Message: "created"})
			err := w.call(ctx, func() error { return w.createErr })
			if errors.Is(err, errRemoved) && w.createErr != nil {
				err = w.createErr // read after the loop ended: no race
			}
			return wireResult(w.result(err))
		}
		err = w.call(ctx, func() error {
			if err := confinedTo(sp.Name, w.by, o.By, o.Confined); err != nil {
				return err
			}
			return w.replace(sp, ports, o.Start, o.By)
		})
		if errors.Is(err, errRemoved) {
			continue // removed while we waited: create it anew
		}
		return wireResult(w.result(err))
	}
}

func (s *Supervisor) lifecycle(ctx context.Context, name string, f func(w *workload) error) (*api.Workload, error) {
	w, err := s.lookup(name)
	if err != nil {
		return nil, err
	}
	return wireResult(w.result(gone(name, w.call(ctx, func() error { return f(w) }))))
}

// gone turns a command that met a removal into not_found.
func gone(name string, err error) error {
	if errors.Is(err, errRemoved) {
		return fmt.Errorf("%w: no workload named %q", errdefs.ErrNotFound, name)
	}
	return err
}

func (s *Supervisor) Start(ctx context.Context, name string) (*api.Workload, error) {
	return s.lifecycle(ctx, name, func(w *workload) error { return w.userStart() })
}

func (s *Supervisor) Stop(ctx context.Context, name string) (*api.Workload, error) {
	return s.stop(ctx, name, false)()
}

// Kill stops a workload at once: SIGKILL to every process of it, without a
// grace period, overtaking a stop in progress.
func (s *Supervisor) Kill(ctx context.Context, name string) (*api.Workload, error) {
	return s.stop(ctx, name, true)()
}

// stop sets a workload stopping (killing it, with kill) and returns what
// waits for the stop to end. The wait is apart so that a batch sets every
// workload stopping before it waits for any.
func (s *Supervisor) stop(ctx context.Context, name string, kill bool) (wait func() (*api.Workload, error)) {
	w, err := s.lookup(name)
	if err != nil {
		return func() (*api.Workload, error) { return nil, err }
	}
	if kill {
		w.overtake()
	}
	done := w.callLater(ctx, func() error { return w.userStop(kill) })
	return func() (*api.Workload, error) { return wireResult(w.result(gone(name, done()))) }
}

func (s *Supervisor) Restart(ctx context.Context, name string) (*api.Workload, error) {
	return s.lifecycle(ctx, name, func(w *workload) error {
		if err := w.stopRun(); err != nil {
			return err
		}
		return w.userStart()
	})
}

// Reload has a running workload take its configuration again, as its
// spec's reload says.
func (s *Supervisor) Reload(ctx context.Context, name string) (*api.Workload, error) {
	return s.lifecycle(ctx, name, func(w *workload) error { return w.reload() })
}

// Signal sends sig to every process of the workload. SIGKILL overtakes a
// stop in progress, and then the run it ended counts as signalled.
func (s *Supervisor) Signal(ctx context.Context, name string, sig syscall.Signal) error {
	w, err := s.lookup(name)
	if err != nil {
		return err
	}
	overtaking := sig == syscall.SIGKILL && w.stopping.Load()
	if sig == syscall.SIGKILL {
		w.overtake()
	}
	err = gone(name, w.call(ctx, func() error { return w.signal(sig) }))
	if overtaking && errors.Is(err, errdefs.ErrConflict) {
		return nil
	}
	return err
}

// Delete removes a workload as the API does: without owner or force.
func (s *Supervisor) Delete(ctx context.Context, name string) error {
	return s.Remove(ctx, name, api.RemoveOptions{})
}

// Remove stops and removes a workload; a stop in progress is overtaken.
func (s *Supervisor) Remove(ctx context.Context, name string, o api.RemoveOptions) error {
	return s.remove(ctx, name, removal{owner: o.Owner, force: o.Force, by: o.By, confined: o.Confined})
}

// removal is who removes a workload: the workloads directory's file
// owner, or the API (no owner), forcing past an owner or not; a confined
// caller removes only what it applied.
type removal struct {
	owner    string
	force    bool
	by       uint32
	confined bool
}

func (s *Supervisor) remove(ctx context.Context, name string, o removal) error {
	w, err := s.lookup(name)
	if err != nil {
		return s.removeQuarantined(ctx, name, o, err)
	}
	if v := w.snapshot(false); ownedBy(name, v.Owner, o.owner, o.force) == nil && confinedTo(name, v.AppliedBy, o.by, o.confined) == nil {
		w.overtake()
	}
	return gone(name, w.call(ctx, func() error {
		if err := ownedBy(name, w.owner, o.owner, o.force); err != nil {
			return err
		}
		if err := confinedTo(name, w.by, o.by, o.confined); err != nil {
			return err
		}
		return w.remove()
	}))
}

func (s *Supervisor) Logs(ctx context.Context, name string, q api.LogQuery, out api.LogSink) error {
	if _, err := s.lookup(name); err != nil {
		return err
	}
	lq := logfile.Query{Tail: q.Tail, Since: q.Since, From: q.From, Follow: q.Follow}
	return s.logs.of(name).Read(ctx, lq, logSink{out})
}

// logSink hands a log's records to the API's sink.
type logSink struct{ out api.LogSink }

func (l logSink) Record(r logfile.Record) error { return l.out.Record(api.LogRecord(r)) }
func (l logSink) Flush()                        { l.out.Flush() }

func (s *Supervisor) Events(ctx context.Context, after uint64) (<-chan api.Event, error) {
	in := s.events.subscribe(ctx, after)
	out := make(chan api.Event)
	go func() {
		defer close(out)
		for ev := range in {
			select {
			case out <- api.FromEvent(ev):
			case <-ctx.Done():
				for range in { // closed once ctx's unsubscribe runs
				}
				return
			}
		}
	}()
	return out, nil
}

func (s *Supervisor) Ports(ctx context.Context) ([]api.PortMapping, error) {
	return api.FromPorts(s.portList()), nil
}

func (s *Supervisor) Networks(ctx context.Context) ([]api.Network, error) {
	ns, err := s.networkList()
	if err != nil {
		return nil, err
	}
	out := make([]api.Network, len(ns))
	for i, n := range ns {
		out[i] = api.FromNetwork(n)
	}
	return out, nil
}

func (s *Supervisor) Stats(ctx context.Context) (*api.Stats, error) {
	out := api.FromStats(s.stats())
	return &out, nil
}

func (s *Supervisor) Policies(ctx context.Context) ([]api.Policy, error) {
	ps := s.policyList()
	out := make([]api.Policy, len(ps))
	for i, p := range ps {
		out[i] = api.FromPolicy(p)
	}
	return out, nil
}

// PutPolicy records a policy and puts it in force: it is answered once
// its rules are in the kernel.
func (s *Supervisor) PutPolicy(ctx context.Context, p *spec.Policy) (*api.Policy, error) {
	if err := s.docOwnedBy(spec.KindPolicy, p.Name, "", false); err != nil {
		return nil, err
	}
	if err := s.setPolicy(p.Name, p); err != nil {
		return nil, err
	}
	s.publish(status.Event{Type: status.EventPolicy, Message: "policy " + p.Name + " applied"})
	for _, v := range s.policyList() {
		if v.Name == p.Name {
			out := api.FromPolicy(v)
			return &out, nil
		}
	}
	return nil, fmt.Errorf("%w: policy %s removed meanwhile", errdefs.ErrNotFound, p.Name)
}

func (s *Supervisor) DeletePolicy(ctx context.Context, name string) error {
	if err := s.docOwnedBy(spec.KindPolicy, name, "", false); err != nil {
		return err
	}
	if err := s.setPolicy(name, nil); err != nil {
		return err
	}
	s.publish(status.Event{Type: status.EventPolicy, Message: "policy " + name + " removed"})
	return nil
}

func (s *Supervisor) PutNetwork(ctx context.Context, n *spec.Network) (*api.Network, error) {
	if err := s.docOwnedBy(spec.KindNetwork, n.Name, "", false); err != nil {
		return nil, err
	}
	nw, err := s.putNetwork(ctx, n)
	if nw == nil {
		return nil, err
	}
	s.publish(status.Event{Type: status.EventNetwork, Message: fmt.Sprintf("network %s applied (egress %v, peers %v)", n.Name, n.AllowsEgress(), n.Peers)})
	out := api.FromNetwork(*nw)
	return &out, err
}
