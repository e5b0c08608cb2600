package supervisor

// The supervisor's commands, in its own types (package status, and the
// options below): what the daemon's API adapter, the workloads directory
// and the tests call. The supervisor never imports the wire.

import (
	"context"
	"errors"
	"fmt"
	"syscall"

	"github.com/flyd-dev/flyd/authz"
	"github.com/flyd-dev/flyd/devwatch"
	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/logfile"
	"github.com/flyd-dev/flyd/records"
	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/status"
	"github.com/flyd-dev/flyd/wiring"
)

// ApplyOptions qualify Apply.
type ApplyOptions struct {
	Start bool
	// Owner is the file of the workloads directory the spec comes from;
	// empty for the API. A workload owned by a file is changed only
	// through that file, unless Force.
	Owner string
	Force bool
	// By is the uid of the caller that applies it, recorded with it;
	// Confined holds that caller to its own lane (lanes.go).
	By       uint32
	Confined bool
}

// caller is who applies, as authz judges callers.
func (o ApplyOptions) caller() authz.Caller {
	return authz.Caller{UID: o.By, Confined: o.Confined, File: o.Owner, Force: o.Force}
}

// RemoveOptions qualify Remove, as ApplyOptions do Apply.
type RemoveOptions struct {
	Owner    string
	Force    bool
	By       uint32
	Confined bool
	// Volumes: Down removes the project's named volumes too.
	Volumes bool
}

// caller is who removes, as authz judges callers.
func (o RemoveOptions) caller() authz.Caller {
	return authz.Caller{UID: o.By, Confined: o.Confined, File: o.Owner, Force: o.Force}
}

// Status is the supervisor's part of the daemon's status: its workloads
// by state and its quarantine. The rest (the daemon's version and start,
// its runtimes, the registry, the last event, the workloads directory) is
// the daemon's to add (daemon.Backend).
func (s *Supervisor) Status(ctx context.Context) status.Daemon {
	st := status.Daemon{States: map[status.State]int{}, Quarantined: s.quarantine.List()}
	for _, w := range s.all() {
		st.Workloads++
		st.States[w.snapshot(false).State]++
	}
	return st
}

// List is every workload, without its spec.
func (s *Supervisor) List(ctx context.Context) []status.Workload {
	ws := s.all()
	out := make([]status.Workload, 0, len(ws))
	for _, w := range ws {
		out = append(out, w.snapshot(false))
	}
	return out
}

// Get is one workload, with its spec (secrets redacted).
func (s *Supervisor) Get(ctx context.Context, name string) (*status.Workload, error) {
	w, err := s.lookup(name)
	if err != nil {
		return nil, err
	}
	v := w.snapshot(true)
	return &v, nil
}

// Apply creates or replaces a workload. Replacing with an equal spec
// changes nothing. With Start, it returns after the first start attempt,
// with its outcome in the returned state.
//
// A spec with replicas applies its group (applyGroup); one without, where
// a group of its name runs, replaces the group's replicas.
func (s *Supervisor) Apply(ctx context.Context, sp *spec.Workload, o ApplyOptions) (*status.Workload, error) {
	sp, err := s.normalize(ctx, sp, o)
	if err != nil {
		return nil, err
	}
	defer s.mountHook.Named(sp.Network)
	if sp.Replicated() {
		return s.applyGroup(ctx, sp, o)
	}
	return s.applyOne(ctx, sp, o)
}

// normalize is a spec as Apply takes it: defaulted, valid, with its full
// names; a group of its name that it no longer is has its replicas
// removed.
func (s *Supervisor) normalize(ctx context.Context, sp *spec.Workload, o ApplyOptions) (*spec.Workload, error) {
	if sp.ReplicaOf != "" {
		return nil, &spec.FieldError{Field: "replica_of", Msg: "is flyd's own: a replica is made by replicas: on its group"}
	}
	sp = sp.Clone()
	sp.SetDefaults()
	if err := sp.Validate(); err != nil {
		return nil, err
	}
	sp.Qualify()
	if w, err := s.lookup(sp.Name); err == nil && w.group != "" {
		return nil, fmt.Errorf("%w: %s is a replica of %s: apply or scale the group", errdefs.ErrConflict, sp.Name, w.group)
	}
	if sp.Replicated() {
		return sp, s.replicasOwned(sp, o.By)
	}
	if err := s.removeGroup(ctx, sp.Name, o.caller(), nil); err != nil {
		return nil, fmt.Errorf("%s stops being a group of replicas: %w", sp.Name, err)
	}
	return sp, nil
}

// applyOne applies one workload's spec, defaulted, valid and qualified.
func (s *Supervisor) applyOne(ctx context.Context, sp *spec.Workload, o ApplyOptions) (*status.Workload, error) {
	pd, err := s.prepare(ctx, sp, o)
	if err != nil {
		return nil, err
	}
	if pd.rulesPending {
		if err := s.net.Project(); err != nil {
			pd.release()
			return nil, err
		}
	}
	return s.finish(ctx, pd)
}

// prepared is a spec that passed every check and holds its ports in its
// network, the rules they change not yet projected when rulesPending is set: what
// finish creates or replaces the workload from.
type prepared struct {
	sp           *spec.Workload
	o            ApplyOptions
	ports        []status.PortMapping
	rulesPending bool
	release      func() // the quarantined record's claim
}

// prepare checks a spec, defaulted, valid and qualified, as its apply
// would, and reserves its ports (netplane.Reserve); the projection its
// declaration owes is the caller's to have done before finish.
func (s *Supervisor) prepare(ctx context.Context, sp *spec.Workload, o ApplyOptions) (*prepared, error) {
	if err := s.drivers.Available(ctx, sp.Kind); err != nil {
		return nil, err
	}
	if sp.Resources != nil && s.cfg.Cgroups == nil {
		return nil, fmt.Errorf("%w: resources need cgroups, and this host gives flyd none", errdefs.ErrRuntimeUnavailable)
	}
	if err := s.checkAfter(sp); err != nil {
		return nil, err
	}
	if err := devwatch.Check(sp.Watch, sp.Watching); err != nil {
		return nil, err
	}
	if w, err := s.lookup(sp.Name); err == nil {
		if err := authz.Decide(o.caller(), authz.Apply, w.viewDoc()); err != nil {
			return nil, err
		}
	}
	if o.Confined {
		if err := s.checkLane(sp, o.By); err != nil {
			return nil, err
		}
		if err := s.replicaNameOf(sp.Name, o.By); err != nil {
			return nil, err
		}
	} else if err := s.networkOwned(sp, o.By); err != nil {
		return nil, err
	}
	// Checked before any port is taken: a spec the kernel would refuse
	// must not hold a port. Port placeholders are as long as real ports.
	resolved, used, err := s.wire(sp, o.By, true)
	if err != nil {
		return nil, err
	}
	if pl, err := wiring.PlanRun(resolved, s.drivers.Capabilities(sp.Kind).RuntimeContext, wiring.PlaceholderPorts(sp), used); err != nil {
		return nil, err
	} else if err := pl.Check(s.carriers.Dir(sp.Name)); err != nil {
		return nil, err
	}
	// A quarantined record of the name is replaced; its run ends first.
	q, release, err := s.claimQuarantine(ctx, sp.Name, o.caller(), authz.Apply)
	if err != nil {
		return nil, err
	}
	if q != nil {
		// Its ports outside the network its new spec names go;
		// Reserve settles those inside it.
		s.net.ReleaseElsewhere(sp.Name, sp.Network)
	}
	ports, rulesPending, err := s.net.Reserve(ctx, sp, o.By)
	if err != nil {
		release()
		return nil, err
	}
	return &prepared{sp: sp, o: o, ports: ports, rulesPending: rulesPending, release: release}, nil
}

// finish creates or replaces the workload of a prepared spec.
func (s *Supervisor) finish(ctx context.Context, pd *prepared) (*status.Workload, error) {
	defer pd.release()
	sp, o, ports := pd.sp, pd.o, pd.ports
	for attached := true; ; attached = false {
		if !attached {
			// Assigned again: a workload removed meanwhile, or whose
			// create failed, released what the last pass took.
			var err error
			if ports, err = s.net.Attach(ctx, sp, o.By); err != nil {
				return nil, err
			}
		}
		w, created := s.register(sp, ports, status.Workload{State: status.Pending}, func(w *workload) { w.createErr = w.create(o.Start && !sp.Disabled, o.Owner, o.By) })
		if created {
			s.publish(status.Event{Type: status.EventApplied, Workload: sp.Name, Message: "created"})
			err := w.call(ctx, func() error { return w.createErr })
			if errors.Is(err, errRemoved) && w.createErr != nil {
				err = w.createErr // read after the loop ended: no race
			}
			return w.result(err)
		}
		err := w.call(ctx, func() error {
			if err := authz.Decide(o.caller(), authz.Apply, w.doc()); err != nil {
				return err
			}
			// A disabled workload is started by flyd start alone: an
			// apply keeps it as it is, running or not.
			return w.replace(sp, ports, o.Start && (!sp.Disabled || w.desired), o.By)
		})
		if errors.Is(err, errRemoved) {
			continue // removed while we waited: create it anew
		}
		return w.result(err)
	}
}

func (s *Supervisor) lifecycle(ctx context.Context, name string, f func(w *workload) error) (*status.Workload, error) {
	w, err := s.lookup(name)
	if err != nil {
		return nil, err
	}
	c := authz.CallerOf(ctx)
	return w.result(gone(name, w.call(ctx, func() error {
		if err := authz.Decide(c, authz.Act, w.doc()); err != nil {
			return err
		}
		return f(w)
	})))
}

// gone turns a command that met a removal into not_found.
func gone(name string, err error) error {
	if errors.Is(err, errRemoved) {
		return fmt.Errorf("%w: no workload named %q", errdefs.ErrNotFound, name)
	}
	return err
}

func (s *Supervisor) Start(ctx context.Context, name string) (*status.Workload, error) {
	return s.lifecycle(ctx, name, func(w *workload) error { return w.userStart() })
}

func (s *Supervisor) Stop(ctx context.Context, name string) (*status.Workload, error) {
	return s.stop(ctx, name, false, nil)()
}

// Kill stops a workload at once: SIGKILL to every process of it, without a
// grace period, overtaking a stop in progress.
func (s *Supervisor) Kill(ctx context.Context, name string) (*status.Workload, error) {
	return s.stop(ctx, name, true, nil)()
}

// stop sets a workload stopping (killing it, with kill) and returns what
// waits for the stop to end. The wait is apart so that a batch sets every
// workload stopping before it waits for any. A batch's member m (nil for
// a stop on its own) has the state at rest recorded with the batch's
// others, in one journal write; it is left when the stop records none.
func (s *Supervisor) stop(ctx context.Context, name string, kill bool, m *records.Member) (wait func() (*status.Workload, error)) {
	w, err := s.lookup(name)
	if err == nil {
		err = mayAct(ctx, w)
	}
	if err != nil {
		if m != nil {
			m.Leave()
		}
		return func() (*status.Workload, error) { return nil, err }
	}
	if kill {
		w.killStopNow()
	}
	c := authz.CallerOf(ctx)
	done := w.callLater(ctx, func() error {
		if m != nil {
			w.member = m
			defer func() { w.member = nil; m.Leave() }()
		}
		if err := authz.Decide(c, authz.Act, w.doc()); err != nil {
			return err
		}
		return w.userStop(kill)
	})
	return func() (*status.Workload, error) {
		err := gone(name, done())
		if m != nil {
			m.Leave() // a stop whose command never ran
		}
		return w.result(err)
	}
}

func (s *Supervisor) Restart(ctx context.Context, name string) (*status.Workload, error) {
	return s.lifecycle(ctx, name, func(w *workload) error {
		if err := w.stopRun(); err != nil {
			return err
		}
		return w.userStart()
	})
}

// Reload has a running workload take its configuration again, as its
// spec's reload says.
func (s *Supervisor) Reload(ctx context.Context, name string) (*status.Workload, error) {
	return s.lifecycle(ctx, name, func(w *workload) error { return w.reload() })
}

// Signal sends sig to every process of the workload. SIGKILL overtakes a
// stop in progress, and then the run it ended counts as signalled.
func (s *Supervisor) Signal(ctx context.Context, name string, sig syscall.Signal) error {
	w, err := s.lookup(name)
	if err != nil {
		return err
	}
	if err := mayAct(ctx, w); err != nil {
		return err
	}
	overtaking := sig == syscall.SIGKILL && w.stopping.Load()
	if sig == syscall.SIGKILL {
		w.killStopNow()
	}
	c := authz.CallerOf(ctx)
	err = gone(name, w.call(ctx, func() error {
		if err := authz.Decide(c, authz.Act, w.doc()); err != nil {
			return err
		}
		return w.signal(sig)
	}))
	if overtaking && errors.Is(err, errdefs.ErrConflict) {
		return nil
	}
	return err
}

// Remove stops and removes a workload; a stop in progress is overtaken.
func (s *Supervisor) Remove(ctx context.Context, name string, o RemoveOptions) error {
	return s.remove(ctx, name, o.caller())
}

// remove removes a workload for c: the workloads directory's file
// owner, or the API (no owner), forcing past an owner or not; a confined
// caller removes only what it applied.
func (s *Supervisor) remove(ctx context.Context, name string, c authz.Caller) error {
	w, err := s.lookup(name)
	if err != nil {
		if len(s.replicas(name)) > 0 {
			return s.removeGroup(ctx, name, c, err)
		}
		return s.removeQuarantined(ctx, name, c, err)
	}
	if authz.Decide(c, authz.Remove, w.viewDoc()) == nil {
		w.killStopNow()
	}
	return gone(name, w.call(ctx, func() error {
		if err := authz.Decide(c, authz.Remove, w.doc()); err != nil {
			return err
		}
		return w.remove()
	}))
}

// Logs gives out the records of a workload's log that q selects and,
// following, what is written next until ctx is done.
func (s *Supervisor) Logs(ctx context.Context, name string, q logfile.Query, out logfile.Sink) error {
	w, err := s.lookup(name)
	if err != nil {
		return err
	}
	if err := mayAct(ctx, w); err != nil {
		return err
	}
	return s.logs.Log(name).Read(ctx, q, out)
}

// Ports is every endpoint's allocation.
func (s *Supervisor) Ports(ctx context.Context) []status.PortMapping {
	var out []status.PortMapping
	for _, w := range s.all() {
		out = append(out, w.snapshot(false).Ports...)
	}
	return out
}
