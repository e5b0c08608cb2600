package logfile

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// logChange is something done to the log at path while Follow runs.
type logChange = func(t *testing.T, path string)

// followStep changes the log, then Follow's whole output must become want.
type followStep struct {
	do   logChange
	want string
}

func appendStep(s string) logChange {
	return func(t *testing.T, path string) { appendFile(t, path, s) }
}

func rotateStep(t *testing.T, path string) {
	if _, err := Rotate(path, 1, 3); err != nil {
		t.Fatal(err)
	}
}

func nothing(*testing.T, string) {}

func TestFollow(t *testing.T) {
	tests := []struct {
		name    string
		initial *string // nil: the file does not exist yet
		n       int
		steps   []followStep
	}{
		{
			name: "tails then follows appends", initial: ptr("a\nb\nc\n"), n: 2,
			steps: []followStep{
				{nothing, "b\nc\n"},
				{appendStep("d\n"), "b\nc\nd\n"},
				{appendStep("partial"), "b\nc\nd\npartial"},
				{appendStep(" line\n"), "b\nc\nd\npartial line\n"},
			},
		},
		{
			name: "negative writes the whole file first", initial: ptr("a\nb\n"), n: -1,
			steps: []followStep{
				{nothing, "a\nb\n"},
				{appendStep("c\n"), "a\nb\nc\n"},
			},
		},

		{
			name: "waits for the file", n: 10,
			steps: []followStep{
				{nothing, ""},
				{appendStep("first\n"), "first\n"},
				{appendStep("second\n"), "first\nsecond\n"},
			},
		},
		{
			name: "survives a rotation", initial: ptr("1\n"), n: 10,
			steps: []followStep{
				{nothing, "1\n"},
				{func(t *testing.T, path string) {
					appendFile(t, path, "2\n")
					rotateStep(t, path)
					appendFile(t, path, "3\n")
				}, "1\n2\n3\n"},
				{appendStep("4\n"), "1\n2\n3\n4\n"},
			},
		},
		{
			name: "survives rotations in quick succession", initial: ptr("start\n"), n: 10,
			steps: []followStep{
				{nothing, "start\n"},
				{func(t *testing.T, path string) {
					for i := range 3 {
						appendFile(t, path, strconv.Itoa(i)+"\n")
						rotateStep(t, path)
					}
					appendFile(t, path, "end\n")
				}, "start\n0\n1\n2\nend\n"},
			},
		},
		{
			name: "moves to a replaced file", initial: ptr("old\n"), n: 10,
			steps: []followStep{
				{nothing, "old\n"},
				{func(t *testing.T, path string) {
					if err := Remove(path, 3); err != nil {
						t.Fatal(err)
					}
					writeFile(t, path, "new\n")
				}, "old\nnew\n"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "w.log")
			if tt.initial != nil {
				writeFile(t, path, *tt.initial)
			}
			out := &syncBuffer{}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- Follow(ctx, out, path, tt.n, 3) }()
			defer func() {
				cancel()
				if err := <-done; err != nil {
					t.Errorf("Follow returned %v", err)
				}
			}()
			for i, s := range tt.steps {
				s.do(t, path)
				waitForOutput(t, out, s.want, "step "+strconv.Itoa(i))
			}
			// Give a late duplicate the chance to show up.
			time.Sleep(10 * FollowPollInterval)
			if got, want := out.String(), tt.steps[len(tt.steps)-1].want; got != want {
				t.Errorf("output %q, want %q", got, want)
			}
		})
	}
}

// TestFollowCatchUp drives the follower poll by poll, so each change
// lands exactly between two polls; TestFollow cannot choose its timing.
// Some changes stop a rotation half-way, as a poll can catch it.
func TestFollowCatchUp(t *testing.T) {
	rotateKeepingOne := func(t *testing.T, path string) {
		if _, err := Rotate(path, 1, 1); err != nil {
			t.Fatal(err)
		}
	}
	// The two halves of a rotation of a log with 3 generations.
	shift := func(t *testing.T, path string) {
		if err := shiftGenerations(path, 3); err != nil {
			t.Fatal(err)
		}
	}
	copyToFirst := func(t *testing.T, path string) { writeFile(t, genPath(path, 1), readFile(t, path)) }
	truncate := func(t *testing.T, path string) {
		if err := os.Truncate(path, 0); err != nil {
			t.Fatal(err)
		}
	}
	type poll struct {
		change []logChange
		want   string // what the poll after the change writes
	}
	tests := []struct {
		name        string
		oldGen      bool // a generation exists before Follow starts
		generations int
		polls       []poll
	}{
		{
			name: "written just before the rotation",
			polls: []poll{
				{[]logChange{appendStep("b\n"), rotateStep}, "b\n"},
				{nil, ""},
			},
		},
		{
			name: "written before and after the rotation",
			polls: []poll{
				{[]logChange{appendStep("b\n"), rotateStep, appendStep("c\n")}, "b\nc\n"},
				{nil, ""},
			},
		},
		{
			name: "live file grew back past the offset",
			polls: []poll{
				{[]logChange{appendStep("b\n"), rotateStep, appendStep("a much longer line than before\n")}, "b\na much longer line than before\n"},
			},
		},
		{
			name: "two rotations",
			polls: []poll{
				{[]logChange{appendStep("b\n"), rotateStep, appendStep("c\n"), rotateStep, appendStep("d\n")}, "b\nc\nd\n"},
				{nil, ""},
			},
		},
		{
			name: "after earlier rotations",
			polls: []poll{
				{[]logChange{appendStep("b\n"), rotateStep}, "b\n"},
				{[]logChange{appendStep("c\n"), rotateStep}, "c\n"},
				{[]logChange{appendStep("d\n"), rotateStep, appendStep("e\n")}, "d\ne\n"},
			},
		},
		{
			name: "rotation caught after its shift",
			polls: []poll{
				{[]logChange{appendStep("b\n"), rotateStep}, "b\n"},
				{[]logChange{appendStep("c\n"), shift}, "c\n"},
				{[]logChange{appendStep("d\n"), copyToFirst, truncate, appendStep("e\n")}, "d\ne\n"},
			},
		},
		{
			name: "rotation caught between rename and truncate",
			polls: []poll{
				{[]logChange{appendStep("b\n"), shift, copyToFirst}, "b\n"},
				{[]logChange{truncate, appendStep("c\n")}, "c\n"},
				{nil, ""},
			},
		},
		{
			name:        "more rotations than generations",
			oldGen:      true,
			generations: 1,
			polls: []poll{
				// "b" was dropped by the second rotation before Follow saw it.
				{[]logChange{appendStep("b\n"), rotateKeepingOne, appendStep("c\n"), rotateKeepingOne, appendStep("d\n")}, "c\nd\n"},
			},
		},
		{
			name: "truncated by someone else",
			polls: []poll{
				{[]logChange{truncate, appendStep("x\n")}, "x\n"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "w.log")
			writeFile(t, path, "first line\n")
			if tt.oldGen {
				writeFile(t, genPath(path, 1), "before Follow\n")
			}
			generations := cmp.Or(tt.generations, 3)
			var out bytes.Buffer
			fl := &follower{ctx: context.Background(), w: &out, flush: func() {}, path: path, generations: generations, buf: make([]byte, 7)}
			defer fl.closeLive()
			if err := fl.start(0); err != nil {
				t.Fatal(err)
			}
			out.Reset()
			for i, p := range tt.polls {
				for _, change := range p.change {
					change(t, path)
				}
				if err := fl.poll(); err != nil {
					t.Fatal(err)
				}
				if got := out.String(); got != p.want {
					t.Errorf("poll %d wrote %q, want %q", i, got, p.want)
				}
				out.Reset()
			}
		})
	}
}

// TestFollowUnderConcurrentWriter follows a child process writing
// numbered lines while the file is rotated under it. Follow's output
// must hold every line that is on disk at the end, in order, once. Lines
// destroyed in Rotate's loss window (see TestRotateUnderConcurrentWriter)
// are not on disk, and Follow may or may not have read them first.
func TestFollowUnderConcurrentWriter(t *testing.T) {
	const generations = 1000
	path := filepath.Join(t.TempDir(), "w.log")
	f, err := Open(path) // exists before Follow starts, so n=0 misses nothing
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	out := &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	followDone := make(chan error, 1)
	go func() { followDone <- Follow(ctx, out, path, -1, generations) }()

	stop := startShellWriter(t, path)
	windows := rotateUntil(t, path, 8<<10, generations, 20)
	written := stop()
	waitFor(t, "Follow to reach the end", func() bool {
		return strings.HasSuffix(out.String(), "end "+strconv.Itoa(written)+"\n")
	})
	cancel()
	if err := <-followDone; err != nil {
		t.Fatal(err)
	}

	var disk strings.Builder
	for _, file := range generationsThenLive(path, generations) {
		disk.WriteString(readFile(t, file))
	}
	followed := streamLines(t, out.String())
	for i := 1; i < len(followed); i++ {
		if followed[i] <= followed[i-1] {
			t.Fatalf("Follow wrote line %d after line %d", followed[i], followed[i-1])
		}
	}
	seen := make(map[int]bool, len(followed))
	for _, n := range followed {
		seen[n] = true
	}
	onDisk := streamLines(t, disk.String())
	missed := 0
	for _, n := range onDisk {
		if !seen[n] {
			missed++
		}
	}
	t.Logf("%d rotations; %d lines written, %d on disk, %d followed", len(windows), written, len(onDisk), len(followed))
	if missed > 0 {
		t.Errorf("Follow missed %d lines that are on disk", missed)
	}
}

// streamLines returns the numbers of the whole lines in the
// concatenation of a log's files. A line torn by a rotation (see
// checkStream) runs into the next one, as in "line 12line 13"; only the
// last, whole line of such a run counts.
func streamLines(t *testing.T, s string) []int {
	t.Helper()
	var ns []int
	for _, l := range strings.Split(strings.TrimSuffix(s, "\n"), "\n") {
		// A line cut by Rotate's loss window runs into the next one: keep
		// the last whole record, which may be the final "end N".
		l = l[max(0, strings.LastIndex(l, "line "), strings.LastIndex(l, "end ")):]
		if l == "" || strings.HasPrefix(l, "end ") {
			continue
		}
		ns = append(ns, parseLines(t, l)...)
	}
	return ns
}

func TestFollowFlushes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.log")
	writeFile(t, path, "a\n")
	out := &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Follow(ctx, out, path, 10, 3) }()
	waitFor(t, "initial tail", func() bool { return out.String() == "a\n" })
	appendFile(t, path, "b\n")
	waitFor(t, "appended line", func() bool { return out.String() == "a\nb\n" })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	out.mu.Lock()
	defer out.mu.Unlock()
	if out.flushes < 2 {
		t.Fatalf("%d flushes, want one after the tail and one after the append", out.flushes)
	}
}

// TestFollowReturnsOnCancel uses a poll interval far longer than the
// test: Follow must return on cancellation, not at its next poll.
func TestFollowReturnsOnCancel(t *testing.T) {
	tests := []struct {
		name   string
		exists bool
	}{
		{"following a file", true},
		{"waiting for a file", false},
	}
	defer func(old time.Duration) { FollowPollInterval = old }(FollowPollInterval)
	FollowPollInterval = time.Hour
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "w.log")
			if tt.exists {
				writeFile(t, path, "a\n")
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- Follow(ctx, &syncBuffer{}, path, 10, 3) }()
			time.Sleep(20 * time.Millisecond)
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("Follow returned %v, want nil", err)
				}
			case <-time.After(time.Second):
				t.Fatal("Follow did not return after cancel")
			}
		})
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("client went away") }

func TestFollowReturnsWriteError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.log")
	writeFile(t, path, "a\n")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := Follow(ctx, failingWriter{}, path, 10, 3); err == nil || ctx.Err() != nil {
		t.Fatalf("Follow = %v (ctx %v), want the write error before the timeout", err, ctx.Err())
	}
}
