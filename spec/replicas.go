package spec

import (
	"strconv"
	"strings"
)

// MaxReplicas bounds replicas: each is a whole workload (process, cgroup,
// log, ports), and a published port balances across at most this many.
const MaxReplicas = 64

// Replicated says whether w stands for a group of replicas rather than
// one workload.
func (w *Workload) Replicated() bool { return w.Replicas > 0 }

// ReplicaName is the name of a group's replica i, counted from 1:
// NAME-i, in the group's project.
func ReplicaName(group string, i int) string { return group + "-" + strconv.Itoa(i) }

// ReplicaIndex is the index of replica name in group, 0 when name is not
// one of its replica names.
func ReplicaIndex(group, name string) int {
	rest, ok := strings.CutPrefix(name, group+"-")
	if !ok || rest == "" || rest[0] == '0' {
		return 0
	}
	i, err := strconv.Atoi(rest)
	if err != nil || i < 1 || i > MaxReplicas {
		return 0
	}
	return i
}

// Replica is replica i of the group w: a workload of its own named NAME-i,
// with w's spec but for the count, which it holds in ReplicaOf. w is
// qualified and validated.
func (w *Workload) Replica(i int) *Workload {
	r := w.Clone()
	r.Name = ReplicaName(w.Name, i)
	r.Replicas, r.ReplicaOf = 0, w.Name
	// The group's identity: replicas are one service.
	id := w.Identified()
	r.Identity = &id
	return r
}

// Group is the spec of the group replica r belongs to, with n replicas:
// what `flyd scale` applies again.
func (r *Workload) Group(n int) *Workload {
	g := r.Clone()
	g.Name, g.Replicas, g.ReplicaOf = r.ReplicaOf, n, ""
	return g
}

// validateReplicas checks that replicas can share a network: every one
// of them listens in the same namespace, so each endpoint's port is
// chosen per replica (ephemeral); a published port is the group's,
// balanced across its ready replicas.
func (w *Workload) validateReplicas(p *problems) {
	if w.Replicas == 0 {
		return
	}
	if w.Replicas < 0 || w.Replicas > MaxReplicas {
		p.add("replicas", "must be between 1 and %d, got %d", MaxReplicas, w.Replicas)
		return
	}
	if !validFull(ReplicaName(w.Name, w.Replicas)) {
		p.add("replicas", "%s, the last replica's name, must be %s: shorten the name", BareName(ReplicaName(w.Name, w.Replicas)), nameRule)
	}
	if w.Schedule != "" {
		p.add("replicas", "a scheduled one-shot runs once at its times: it has no replicas")
	}
	for i, e := range w.Endpoints {
		if e.External() || e.Port.Mode == PortEphemeral {
			continue
		}
		p.add(indexPath("endpoints", i)+".port", "replicas share their network, so each needs a port of its own: say port: ephemeral (a published port, fixed or hashed, is the group's, balanced across its replicas)")
	}
}
