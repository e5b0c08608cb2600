// Package order is what the `after` order of workloads decides, as pure
// functions of their specs and states: whether a prerequisite is ready by
// its entry's condition (spec.ParseAfter), or never will be; whether a
// workload waits for a name, or follows it; the levels workloads stop in,
// dependents first, in a lane of each owner's; a function run over such
// levels and lanes, the outcomes in the order of the names. Which workloads wait, and when they are asked again,
// is the supervisor's.
package order

import (
	"fmt"
	"slices"
	"sync"

	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/status"
)

// Ready judges a prerequisite, as v shows it (with its spec), by its
// `after` entry's condition cond; never says why it will never be ready:
// it failed, or a one-shot waited for to complete exited with an error.
func Ready(v status.Workload, cond string) (ready bool, never string) {
	healthy := v.Spec == nil || v.Spec.Health == nil || (v.Healthy != nil && *v.Healthy)
	// A scheduled one-shot between runs completed if its last run did.
	completed := (v.State == status.Exited || v.State == status.Scheduled) && v.LastExit.Succeeded()
	switch {
	case v.State == status.Failed:
		return false, fmt.Sprintf("%s, which it waits for, failed: %s", v.Name, v.LastError)
	case cond == spec.AfterCompleted && v.State == status.Exited && !completed:
		return false, fmt.Sprintf("%s, which it waits for to complete, ended with %s", v.Name, v.LastExit)
	case cond == spec.AfterCompleted:
		return completed, ""
	}
	return v.State == status.Running && (cond != spec.AfterHealthy || healthy), ""
}

// WaitsFor says whether the workload v shows (with its spec) is pending
// with name among its prerequisites.
func WaitsFor(v status.Workload, name string) bool {
	return v.State == status.Pending && v.Spec != nil && slices.Contains(spec.AfterNames(v.Spec.Prerequisites()), name)
}

// Follows says whether sp follows name, or the group of replicas name is
// of ("" for none): an `after` entry of sp names it and ends in
// spec.AfterFollows.
func Follows(sp *spec.Workload, name, group string) bool {
	return slices.ContainsFunc(sp.After, func(e string) bool {
		n, _ := spec.ParseAfter(e)
		return (n == name || n == group && group != "") && spec.Follows(e)
	})
}

// StopLevels groups names into the levels they stop in: each level's
// workloads depend (by `after` or `uses`) on none of the later levels',
// so dependents stop before what they depend on, as compose's down does,
// and a level stops in parallel. specOf gives a name's spec, nil for a
// name not known: those are in the first level. Without dependencies
// among them, or should their specs hold a cycle, it is one level.
func StopLevels(names []string, specOf func(name string) *spec.Workload) [][]string {
	specs := make([]*spec.Workload, 0, len(names))
	var unknown []string
	for _, n := range names {
		if sp := specOf(n); sp != nil {
			specs = append(specs, sp)
		} else {
			unknown = append(unknown, n)
		}
	}
	levels, err := spec.Order(specs)
	if err != nil {
		// Applied specs hold no cycle; should they, all stop at once.
		return [][]string{names}
	}
	out := make([][]string, 0, len(levels)+1)
	for i := len(levels) - 1; i >= 0; i-- {
		l := make([]string, len(levels[i]))
		for k, w := range levels[i] {
			l[k] = w.Name
		}
		out = append(out, l)
	}
	if len(unknown) > 0 && len(out) > 0 {
		out[0] = append(out[0], unknown...)
	} else if len(unknown) > 0 {
		out = append(out, unknown)
	}
	return out
}

// StopLanes groups names by owner (ownerOf), each owner's a lane of the
// levels its names stop in among themselves (StopLevels): a dependency
// between two owners' workloads orders no stop, so that one owner's
// stops never wait for another's grace period. The lanes stop side by
// side (InLanes), in the order of each owner's first name.
func StopLanes(names []string, specOf func(name string) *spec.Workload, ownerOf func(name string) uint32) [][][]string {
	var owners []uint32
	byOwner := map[uint32][]string{}
	for _, n := range names {
		o := ownerOf(n)
		if _, ok := byOwner[o]; !ok {
			owners = append(owners, o)
		}
		byOwner[o] = append(byOwner[o], n)
	}
	lanes := make([][][]string, len(owners))
	for i, o := range owners {
		lanes[i] = StopLevels(byOwner[o], specOf)
	}
	return lanes
}

// InLanes runs level on every level of lanes: a lane's levels one after
// another, the lanes side by side, so that no lane waits for another's.
// level returns an outcome for each name of its level, in its order; the
// outcomes come in the order of names, which lanes hold.
func InLanes[T any](names []string, lanes [][][]string, level func(names []string) []T) []T {
	outs := make([][][]T, len(lanes))
	var wg sync.WaitGroup
	for i, lane := range lanes {
		outs[i] = make([][]T, len(lane))
		wg.Go(func() {
			for k, l := range lane {
				outs[i][k] = level(l)
			}
		})
	}
	wg.Wait()
	byName := make(map[string]T, len(names))
	for i, lane := range lanes {
		for k, l := range lane {
			for j, n := range l {
				byName[n] = outs[i][k][j]
			}
		}
	}
	out := make([]T, len(names))
	for i, n := range names {
		out[i] = byName[n]
	}
	return out
}

// InLevels runs f on every name of levels, a level at a time, each level
// through each (which runs a function for 0…n-1, at once or a few at a
// time); the outcomes come in the order of names, which levels hold.
func InLevels[T any](names []string, levels [][]string, each func(n int, f func(i int)), f func(name string) T) []T {
	byName := make(map[string]T, len(names))
	for _, level := range levels {
		// Each call has its own slot: no lock between them.
		outs := make([]T, len(level))
		each(len(level), func(i int) { outs[i] = f(level[i]) })
		for i, n := range level {
			byName[n] = outs[i]
		}
	}
	out := make([]T, len(names))
	for i, n := range names {
		out[i] = byName[n]
	}
	return out
}
