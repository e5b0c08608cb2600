package api

import (
	"time"

	"github.com/flyd-dev/flyd/status"
)

// The supervisor's status, converted to the wire. Each wire type has
// its own fields and JSON names; these are the one place that ties them
// to the supervisor's.

// FromWorkload is w as the API shows it.
func FromWorkload(w status.Workload) Workload {
	out := Workload{
		Name: w.Name, Kind: w.Kind, State: w.State, Since: w.Since, Reason: w.Reason,
		PID: w.PID, ContainerID: w.ContainerID, StartedAt: w.StartedAt, Restarts: w.Restarts,
		LastExit: fromExit(w.LastExit), LastError: w.LastError, NextStart: w.NextStart,
		Healthy: w.Healthy, Ports: FromPorts(w.Ports), Spec: w.Spec, Owner: w.Owner, NotifyRefused: w.NotifyRefused,
		AppliedBy: w.AppliedBy, Group: w.Group,
	}
	out.Up, out.NotUp = w.Readiness(time.Now())
	if h := w.LimitHits; h != nil {
		out.LimitHits = &LimitHits{OOMKills: h.OOMKills, LastOOMKill: h.LastOOMKill, PidsRefusals: h.PidsRefusals, LastRefusal: h.LastRefusal}
	}
	return out
}

func fromExit(e *status.Exit) *Exit {
	if e == nil {
		return nil
	}
	return &Exit{Code: e.Code, Signal: e.Signal, At: e.At, Unknown: e.Unknown, Reason: e.Reason, Description: e.Description}
}

// FromPorts is ports as the API shows them.
func FromPorts(ports []status.PortMapping) []PortMapping {
	if ports == nil {
		return nil
	}
	out := make([]PortMapping, len(ports))
	for i, p := range ports {
		out[i] = PortMapping{Workload: p.Workload, Endpoint: p.Endpoint, API: p.API, Port: p.Port,
			Published: p.Published, Network: p.Network, Location: p.Location, Instances: make([]Instance, len(p.Instances))}
		for k, in := range p.Instances {
			out[i].Instances[k] = Instance(in)
		}
	}
	return out
}

// FromNetwork is n as the API shows it.
func FromNetwork(n status.Network) Network {
	out := Network{Name: n.Name, Path: n.Path, Workloads: n.Workloads, Link: n.Link,
		Address: n.Address, Gateway: n.Gateway, Egress: n.Egress}
	for _, p := range n.Published {
		out.Published = append(out.Published, Published(p))
	}
	return out
}

// FromEvent is ev as /v1/events sends it.
func FromEvent(ev status.Event) Event {
	return Event{Seq: ev.Seq, Time: ev.Time, Type: ev.Type, Workload: ev.Workload, Project: ev.Project,
		State: ev.State, Message: ev.Message, Exit: fromExit(ev.Exit)}
}

// FromFileProblem and FromQuarantined are what status shows of them.
func FromFileProblem(p status.FileProblem) FileProblem { return FileProblem(p) }
func FromQuarantined(q status.Quarantined) Quarantined { return Quarantined(q) }

// FromPolicy is p as the API shows it.
func FromPolicy(p status.Policy) Policy {
	return Policy{Name: p.Name, Spec: p.Spec, Guards: append([]string{}, p.Guards...), Problems: p.Problems}
}

// FromStats is a sample as the API shows it.
func FromStats(st status.Stats) Stats {
	out := Stats{At: st.At, IntervalMS: st.Interval.Milliseconds(), Workloads: make([]Usage, len(st.Workloads))}
	for i, u := range st.Workloads {
		out.Workloads[i] = Usage{Workload: u.Workload, CPUSeconds: u.CPU.Seconds(), MemoryBytes: u.Memory, Processes: u.Procs}
	}
	return out
}

// FromDaemon is the daemon's status as the API shows it; the server adds
// what only it knows (its open streams).
func FromDaemon(d status.Daemon) *Status {
	st := &Status{
		Version: d.Version, PID: d.PID, StartedAt: d.StartedAt, Workloads: d.Workloads,
		Uptime:   time.Since(d.StartedAt).Round(time.Second).String(),
		States:   make(map[State]int, len(d.States)),
		Runtimes: d.Runtimes, LastEvent: d.LastEvent, PublishedPorts: d.PublishedPorts,
		Registry: RegistryStatus{URL: d.Registry.URL, KeyFile: d.Registry.KeyFile, Desired: d.Registry.Desired,
			Registered: d.Registry.Registered, Failing: d.Registry.Failing, Heartbeats: d.Registry.Heartbeats,
			Failures: d.Registry.Failures, LastError: d.Registry.LastError},
	}
	for k, v := range d.States {
		st.States[k] = v
	}
	for _, p := range d.FileProblems {
		st.FileProblems = append(st.FileProblems, FromFileProblem(p))
	}
	for _, q := range d.Quarantined {
		st.Quarantined = append(st.Quarantined, FromQuarantined(q))
	}
	return st
}
