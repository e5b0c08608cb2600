package integration

import (
	"strings"
	"testing"
)

// TestReplicaNameTaken: a group whose replica's name a workload of its
// own holds is refused with a sentence that says so, and what frees it.
func TestReplicaNameTaken(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "alone.yaml", "name: web-2\ncommand: [\"@PROG@\", signals]\n"))
	_, errOut, code := runCLI(t, d.socket, "apply", "-f", d.writeSpec(t, "group.yaml", "name: web\nreplicas: 2\ncommand: [\"@PROG@\", signals]\n"))
	want := "replica web-2 of web: a workload named web-2 exists, of its own, not a replica (flyd rm web-2 frees the name)"
	if code == 0 || !strings.Contains(errOut, want) || strings.Contains(errOut, "none") {
		t.Errorf("apply of a group whose replica's name is taken: exit %d, %q; want an error saying %q", code, errOut, want)
	}
	d.mustCLI(t, "rm", "web", "web-2") // web: its replica web-1, applied before the refusal
}
