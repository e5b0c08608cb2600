package external

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/flyd-dev/flyd/driver"
	"github.com/flyd-dev/flyd/spec"
)

// TestRunsNothingUntilStopped: a run of kind external is in force from
// its start until a stop's signal ends it, cleanly; a reload's signal
// reaches nothing; an earlier daemon's run is taken up as it was.
func TestRunsNothingUntilStopped(t *testing.T) {
	p, err := Driver{}.Start(context.Background(), &driver.Task{Workload: "db", CarrierDir: "/run/x"})
	if err != nil {
		t.Fatal(err)
	}
	if st := p.State(); st.Driver != spec.KindExternal || st.PID != 0 || st.CarrierDir != "/run/x" {
		t.Errorf("State = %+v; want kind external, no pid, its carrier dir", st)
	}
	_ = p.Signal(syscall.SIGHUP)
	select {
	case <-p.Done():
		t.Fatal("a HUP ended the run")
	case <-time.After(10 * time.Millisecond):
	}
	again, err := Driver{}.Recover(context.Background(), p.State())
	if err != nil || again.State().StartedAt != p.State().StartedAt {
		t.Fatalf("Recover = %+v, %v; want the run as it was", again, err)
	}
	_ = p.Signal(syscall.SIGTERM)
	<-p.Done()
	if e := p.Exit(); !e.Success() {
		t.Errorf("Exit after a stop = %v; want a clean end", e)
	}
	_ = p.Kill() // ended already: nothing happens
}
