package containerd

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/flyd-dev/flyd/driver"
)

// TestExecInside: a command run in a container runs as its process does
// (its user, its root: the file the container made), its output and exit
// code told; one that outlives its context is killed, and nothing of it
// is left once the container is removed.
func TestExecInside(t *testing.T) {
	d := setup(t)
	tk := task(t, "exec", "sh", "-c", "touch /tmp/made-inside; echo started; exec sleep 600")
	tk.Spec.User = "nobody"
	p, err := d.Start(context.Background(), tk)
	if err != nil {
		t.Fatal(err)
	}
	waitLog(t, tk, "started")
	ex, ok := p.(driver.Execer)
	if !ok {
		t.Fatalf("a container's process is no driver.Execer")
	}
	var out strings.Builder
	exit, err := ex.Exec(context.Background(), []string{"sh", "-c", "test -f /tmp/made-inside && id -u && echo to-stderr >&2 && exit 3"}, &out)
	if err != nil {
		t.Fatal(err)
	}
	if exit.Code != 3 || exit.Success() {
		t.Errorf("exit %+v, want code 3", exit)
	}
	if got := out.String(); !strings.Contains(got, "65534\n") || !strings.Contains(got, "to-stderr\n") {
		t.Errorf("output %q: want the container user's uid and stderr", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := ex.Exec(ctx, []string{"sleep", "60"}, &out); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a command past its context: %v, want the deadline", err)
	}
	if took := time.Since(start); took > 15*time.Second {
		t.Errorf("a command past its context took %s to end", took)
	}
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	waitDone(t, p)
	if l := leftovers(t, d); len(l) > 0 {
		t.Fatalf("left behind: %v", l)
	}
}
