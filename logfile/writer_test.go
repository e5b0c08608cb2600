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

// rotateUntil calls Rotate in a tight loop, as an impatient daemon
// would, until it has rotated want times, and returns that count.
func rotateUntil(t *testing.T, path string, maxSize int64, generations, want int) int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	rotations := 0
	for rotations < want {
		if time.Now().After(deadline) {
			t.Fatalf("only %d rotations before the deadline", rotations)
		}
		rotated, err := Rotate(path, maxSize, generations)
		if err != nil {
			t.Fatal(err)
		}
		if rotated {
			rotations++
		}
		time.Sleep(20 * time.Microsecond)
	}
	return rotations
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

// parseLines returns the numbers of the "line N" lines in s, failing on
// any torn or malformed line. The final "end N" line is skipped.
func parseLines(t *testing.T, s string) []int {
	t.Helper()
	var ns []int
	for _, l := range strings.Split(s, "\n") {
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
