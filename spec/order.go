package spec

import (
	"fmt"
	"sort"
	"strings"

	"github.com/flyd-dev/flyd/errdefs"
)

// OrderBatch is Order for a batch that is applied as one: a name given
// twice or a cycle refuses the whole of it, as errdefs.ErrInvalid. The
// daemon and the client that splits a large batch both check with it.
func OrderBatch(ws []*Workload) ([][]*Workload, error) {
	seen := make(map[string]bool, len(ws))
	for _, w := range ws {
		if seen[w.Name] {
			return nil, fmt.Errorf("%w: workload %q is defined twice", errdefs.ErrInvalid, w.Name)
		}
		seen[w.Name] = true
	}
	levels, err := Order(ws)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errdefs.ErrInvalid, err)
	}
	return levels, nil
}

// Order sorts workloads into levels by their `after` lists: every workload
// comes in a later level than the workloads of the set it names, so a
// batch can be applied level by level. Names outside the set are assumed
// to exist already. A cycle is an error naming it.
func Order(ws []*Workload) ([][]*Workload, error) {
	// A group's name stands for its replicas.
	byName := make(map[string][]*Workload, len(ws))
	for _, w := range ws {
		byName[w.Name] = append(byName[w.Name], w)
		if w.ReplicaOf != "" {
			byName[w.ReplicaOf] = append(byName[w.ReplicaOf], w)
		}
	}
	level := map[string]int{}
	visiting := map[string]bool{}
	var visit func(w *Workload, path []string) (int, error)
	visit = func(w *Workload, path []string) (int, error) {
		if l, ok := level[w.Name]; ok {
			return l, nil
		}
		if visiting[w.Name] {
			return 0, &FieldError{Field: "after", Msg: "cycle: " + strings.Join(append(path, w.Name), " → ")}
		}
		visiting[w.Name] = true
		l := 0
		for _, dep := range AfterNames(w.Prerequisites()) {
			for _, d := range byName[dep] {
				dl, err := visit(d, append(path, w.Name))
				if err != nil {
					return 0, err
				}
				l = max(l, dl+1)
			}
		}
		visiting[w.Name] = false
		level[w.Name] = l
		return l, nil
	}
	var levels [][]*Workload
	for _, w := range ws {
		l, err := visit(w, nil)
		if err != nil {
			return nil, fmt.Errorf("workload %s: %w", w.Name, err)
		}
		for len(levels) <= l {
			levels = append(levels, nil)
		}
		levels[l] = append(levels[l], w)
	}
	for _, lv := range levels {
		sort.Slice(lv, func(i, j int) bool { return lv[i].Name < lv[j].Name })
	}
	return levels, nil
}
