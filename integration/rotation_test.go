package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestLogRotation runs a workload that writes a numbered line every
// millisecond under a small --log-max-size: the log is rotated, a follower
// reads through the rotations in order, never twice and without a gap, the tail spans the
// generations, and a stalled reader does not stall the workload.
func TestLogRotation(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, withArgs("--log-max-size", "8Ki", "--log-generations", "2"))
	d.mustCLI(t, "apply", "--start=false", "-f", d.writeSpec(t, "counter.yaml", "name: counter\ncommand: [\"@PROG@\", count]\n"))
	stalled := startStream(t, d.socket, "logs", "-f", "counter")
	follower := startStream(t, d.socket, "logs", "-f", "counter")
	d.waitStreams(t, 2)
	_ = stalled.cmd.Process.Signal(syscall.SIGSTOP) // it reads nothing from now on
	defer stalled.cmd.Process.Signal(syscall.SIGCONT)

	d.mustCLI(t, "start", "counter")
	live := filepath.Join(d.stateDir, "logs", "counter.log")
	eventually(t, "two rotations", func() error {
		_, err := os.Stat(live + ".2")
		return err
	})
	d.mustCLI(t, "stop", "counter")

	last := lastCount(t, d.mustCLI(t, "logs", "--tail", "1", "counter"))
	follower.waitLine(t, "the follower reaching the last line", func(l string) bool { return l == fmt.Sprintf("count %d", last) })
	prev, gaps, damaged := 0, 0, 0
	for _, l := range follower.lines() {
		n, err := strconv.Atoi(strings.TrimPrefix(l, "count "))
		if err != nil || !strings.HasPrefix(l, "count ") {
			damaged++
			continue
		}
		if n <= prev {
			t.Fatalf("the follower read count %d after count %d: a line repeated or out of order", n, prev)
		}
		if n != prev+1 {
			gaps++
		}
		prev = n
	}
	// The daemon writes the log from the workload's pipe and rotates it by
	// renaming: not a line may be lost or cut.
	if gaps+damaged > 0 {
		t.Errorf("%d lines lost and %d damaged across rotations", gaps, damaged)
	}
	if prev != last {
		t.Errorf("the follower ended at count %d, want %d", prev, last)
	}

	tail := strings.Split(strings.TrimSuffix(d.mustCLI(t, "logs", "--tail", "300", "counter"), "\n"), "\n")
	if len(tail) != 300 || lastCount(t, tail[299]) != last {
		t.Errorf("logs --tail 300: %d lines ending %q, want 300 ending at count %d", len(tail), tail[len(tail)-1], last)
	}
	if fi, err := os.Stat(live); err != nil || fi.Size() > 64<<10 {
		t.Errorf("live log: %v, size %d; want it kept near --log-max-size", err, fi.Size())
	}
	if _, err := os.Stat(live + ".3"); err == nil {
		t.Errorf("%s.3 exists with --log-generations 2", live)
	}
	if st, ok := readProc(stalled.cmd.Process.Pid); !ok || st.state != 'T' {
		t.Errorf("the stalled reader should still be stopped: %+v", st)
	}
}

func lastCount(t *testing.T, line string) int {
	t.Helper()
	n, err := strconv.Atoi(strings.TrimPrefix(strings.TrimSpace(line), "count "))
	if err != nil {
		t.Fatalf("not a count line: %q", line)
	}
	return n
}
