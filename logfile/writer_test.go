package logfile

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// startShellWriter starts a child process that writes "line N" to the
// log at path as fast as a shell can, through an inherited O_APPEND
// descriptor as a workload does, until the returned stop is called. stop
// returns how many numbered lines were written; the child ends with an
// "end N" line so the count is known even if lines were lost.
func startShellWriter(t *testing.T, path string) (stop func() int) {
	t.Helper()
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	stopFile := filepath.Join(t.TempDir(), "stop")
	cmd := exec.Command("sh", "-c",
		`i=0; while [ ! -e "$1" ]; do echo "line $i"; i=$((i+1)); done; echo "end $i"`,
		"sh", stopFile)
	cmd.Stdout, cmd.Stderr = f, f
	err = cmd.Start()
	f.Close() // the child holds its own copy
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return func() int {
		t.Helper()
		stopped = true
		writeFile(t, stopFile, "")
		if err := cmd.Wait(); err != nil {
			t.Fatalf("writer: %v", err)
		}
		live := strings.TrimSuffix(readFile(t, path), "\n")
		last := live[strings.LastIndexByte(live, '\n')+1:]
		n, err := strconv.Atoi(strings.TrimPrefix(last, "end "))
		if err != nil || !strings.HasPrefix(last, "end ") {
			t.Fatalf("writer's last line is %q, want \"end N\"", last)
		}
		return n
	}
}

// window is a span of time during which a write may be lost.
type window struct{ start, end time.Time }

func (w window) overlaps(o window) bool {
	return !w.start.After(o.end) && !o.start.After(w.end)
}

// rotateUntil calls Rotate in a tight loop, as an impatient daemon
// would, until it has rotated want times. It returns each rotation's loss
// window: from the start of the final drain to Rotate's return.
func rotateUntil(t *testing.T, path string, maxSize int64, generations, want int) []window {
	t.Helper()
	var drainStart time.Time
	testHookFinalDrain = func() { drainStart = time.Now() }
	defer func() { testHookFinalDrain = nil }()
	deadline := time.Now().Add(30 * time.Second)
	var windows []window
	for len(windows) < want {
		if time.Now().After(deadline) {
			t.Fatalf("only %d rotations before the deadline", len(windows))
		}
		rotated, err := Rotate(path, maxSize, generations)
		if err != nil {
			t.Fatal(err)
		}
		if rotated {
			windows = append(windows, window{drainStart, time.Now()})
		}
		time.Sleep(20 * time.Microsecond)
	}
	return windows
}

// generationsThenLive lists the existing files of a log oldest first,
// the order in which their content was written.
func generationsThenLive(path string, generations int) []string {
	var files []string
	for k := generations; k >= 1; k-- {
		if _, err := os.Stat(genPath(path, k)); err == nil {
			files = append(files, genPath(path, k))
		}
	}
	return append(files, path)
}

// checkStream reads a log written by a numbered-line writer that wrote
// lines 0 to written-1, and fails unless every line is whole and appears
// once, in order, with lines missing only at a rotation boundary: where
// one file ends and the next begins. A generation may end with a torn
// line, the first part of a write lost at that boundary. It returns the
// numbers of the missing lines and how many generations end torn.
func checkStream(t *testing.T, path string, generations, written int) (lost []int, torn int) {
	t.Helper()
	next := 0
	for _, file := range generationsThenLive(path, generations) {
		content := readFile(t, file)
		cut := strings.LastIndexByte(content, '\n') + 1
		for i, n := range parseLines(t, content[:cut]) {
			if n < next || (n > next && i > 0) {
				t.Fatalf("%s: line %d where %d was due (duplicated, reordered or lost mid-file)", file, n, next)
			}
			for ; next < n; next++ {
				lost = append(lost, next)
			}
			next = n + 1
		}
		if tail := content[cut:]; tail != "" {
			// Only the next write can be torn, and only its start survives.
			if file == path || !strings.HasPrefix("line "+strconv.Itoa(next), tail) {
				t.Fatalf("%s ends with %q, neither a whole line nor the start of line %d", file, tail, next)
			}
			torn++
		}
	}
	for ; next < written; next++ {
		lost = append(lost, next)
	}
	return lost, torn
}

// parseLines returns the numbers of the "line N" lines in s, failing on
// any other line except the writer's final "end N".
func parseLines(t *testing.T, s string) []int {
	t.Helper()
	var ns []int
	for _, l := range strings.Split(strings.TrimSuffix(s, "\n"), "\n") {
		if l == "" || strings.HasPrefix(l, "end ") {
			continue
		}
		n, err := strconv.Atoi(strings.TrimPrefix(l, "line "))
		if err != nil || !strings.HasPrefix(l, "line ") {
			t.Fatalf("malformed line %q", l)
		}
		ns = append(ns, n)
	}
	return ns
}
