package records

import (
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/status"
)

func groupSpec(name string) *spec.Workload {
	w := &spec.Workload{Name: name, Command: []string{"/bin/sleep", "1"}}
	w.SetDefaults()
	return w
}

// TestGroupIsOneWrite: the records of a group's members, handed at once
// from many goroutines, or some members leaving instead, go in one
// journal write, and are found after a reopen; a member that hands
// nothing and never leaves holds the others back for the linger only; a
// second change of a member is written on its own.
func TestGroupIsOneWrite(t *testing.T) {
	stateDir, runDir := t.TempDir(), t.TempDir()
	st, err := Open(stateDir, runDir, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	const n = 50
	ms := st.Group(n)
	before := st.Commits()
	var wg sync.WaitGroup
	for i, m := range ms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i%10 == 9 {
				m.Leave()
				return
			}
			if err := m.SaveWorkload(Workload{Spec: groupSpec("w" + string(rune('a'+i/26)) + string(rune('a'+i%26))), Rest: status.Stopped}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if got := st.Commits() - before; got != 1 {
		t.Errorf("a group of %d made %d writes, want 1", n, got)
	}

	ms = st.Group(3)
	start := time.Now()
	if err := ms[0].SaveWorkload(Workload{Spec: groupSpec("late"), Rest: status.Stopped}); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < GroupLinger || d > 2*time.Second {
		t.Errorf("a member whose group never completes waited %s, want about %s", d, GroupLinger)
	}
	ms[1].Leave()
	before = st.Commits()
	if err := ms[1].SaveWorkload(Workload{Spec: groupSpec("again"), Running: true}); err != nil {
		t.Fatal(err)
	}
	if got := st.Commits() - before; got != 1 {
		t.Errorf("a change after a member left made %d writes, want 1", got)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st, err = Open(stateDir, runDir, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	recs, bad := st.Workloads()
	if len(bad) != 0 || len(recs) != n-n/10+2 {
		t.Fatalf("reopened: %d records, bad %v", len(recs), bad)
	}
}
