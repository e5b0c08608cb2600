package logfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestRotate(t *testing.T) {
	tests := []struct {
		name        string
		writes      []string // each written to the live file, then Rotate
		maxSize     int64
		generations int
		wantRotated []bool
		wantLive    string
		wantGens    []string // .1, .2, …; "" means must not exist
	}{
		{
			name:        "below max size",
			writes:      []string{"abc"},
			maxSize:     4,
			generations: 3,
			wantRotated: []bool{false},
			wantLive:    "abc",
			wantGens:    []string{""},
		},
		{
			name:        "at max size",
			writes:      []string{"abcd"},
			maxSize:     4,
			generations: 3,
			wantRotated: []bool{true},
			wantLive:    "",
			wantGens:    []string{"abcd", ""},
		},
		{
			name:        "keeps generations in order and drops the oldest",
			writes:      []string{"one\n", "two\n", "three\n", "four\n", "five\n"},
			maxSize:     1,
			generations: 3,
			wantRotated: []bool{true, true, true, true, true},
			wantLive:    "",
			wantGens:    []string{"five\n", "four\n", "three\n", ""},
		},
		{
			name:        "small files accumulate until max size",
			writes:      []string{"aa", "bb", "cc"},
			maxSize:     4,
			generations: 2,
			wantRotated: []bool{false, true, false},
			wantLive:    "cc",
			wantGens:    []string{"aabb", ""},
		},
		{
			name:        "zero generations only truncates",
			writes:      []string{"abcd"},
			maxSize:     1,
			generations: 0,
			wantRotated: []bool{true},
			wantLive:    "",
			wantGens:    []string{""},
		},
		{
			name:        "zero max size means the default",
			writes:      []string{strings.Repeat("x", 100)},
			maxSize:     0,
			generations: 1,
			wantRotated: []bool{false},
			wantLive:    strings.Repeat("x", 100),
			wantGens:    []string{""},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "w.log")
			for i, w := range tt.writes {
				appendFile(t, path, w)
				rotated, err := Rotate(path, tt.maxSize, tt.generations)
				if err != nil {
					t.Fatal(err)
				}
				if rotated != tt.wantRotated[i] {
					t.Errorf("write %d: rotated = %v, want %v", i, rotated, tt.wantRotated[i])
				}
			}
			if got := readFile(t, path); got != tt.wantLive {
				t.Errorf("live = %q, want %q", got, tt.wantLive)
			}
			for i, want := range tt.wantGens {
				p := genPath(path, i+1)
				if want == "" {
					if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
						t.Errorf("%s exists (err %v), want it absent", p, err)
					}
					continue
				}
				if got := readFile(t, p); got != want {
					t.Errorf("%s = %q, want %q", p, got, want)
				}
			}
			assertNoTempFiles(t, dir)
		})
	}
}

func TestRotateMissingFile(t *testing.T) {
	rotated, err := Rotate(filepath.Join(t.TempDir(), "nope.log"), 1, 3)
	if rotated || err != nil {
		t.Fatalf("Rotate of a missing file = %v, %v; want false, nil", rotated, err)
	}
}

func TestRotateKeepsMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.log")
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	appendFile(t, path, "x\n")
	if _, err := Rotate(path, 1, 1); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(genPath(path, 1))
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != fileMode {
		t.Fatalf(".1 mode %o, want %o", got, fileMode)
	}
}

// TestRotateRecopies appends at the moment the copy has just finished a
// round: everything appended must end up in .1, nothing in the live file
// twice, however many rounds the writer keeps pace with.
func TestRotateRecopies(t *testing.T) {
	tests := []struct {
		name       string
		appendOnly func(round int) bool
	}{
		{"once after the first round", func(r int) bool { return r == 1 }},
		{"after the first two rounds", func(r int) bool { return r <= 2 }},
		{"every round, outpacing the copy", func(int) bool { return true }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "w.log")
			w, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			want := "first\n"
			if _, err := w.WriteString(want); err != nil {
				t.Fatal(err)
			}
			testHookAfterCopyRound = func(round int) {
				if tt.appendOnly(round) {
					line := fmt.Sprintf("appended during round %d\n", round)
					want += line
					if _, err := w.WriteString(line); err != nil {
						t.Error(err)
					}
				}
			}
			defer func() { testHookAfterCopyRound = nil }()

			if _, err := Rotate(path, 1, 1); err != nil {
				t.Fatal(err)
			}
			if got := readFile(t, genPath(path, 1)); got != want {
				t.Errorf(".1 = %q, want %q", got, want)
			}
			if got := readFile(t, path); got != "" {
				t.Errorf("live = %q, want empty", got)
			}
		})
	}
}

// TestRotateUnderConcurrentWriter rotates many times while a real child
// process writes numbered lines as fast as it can to an inherited
// O_APPEND descriptor, as a workload does.
//
// Zero loss is not asserted, because it does not hold: a write that
// completes between Rotate's last read and its truncate is destroyed by
// the truncate, and no re-copy can close that gap without the writer's
// cooperation (TestRotateRecopies proves the re-copy catches everything
// before it). What is asserted holds however the machine schedules: no
// line is duplicated, reordered or torn mid-file, and lines go missing
// only at rotation boundaries. How many go missing depends on scheduling,
// so it is logged, and bounded in time by TestRotateLosesOnlyInWindow.
func TestRotateUnderConcurrentWriter(t *testing.T) {
	const generations = 1000 // enough that nothing is dropped
	path := filepath.Join(t.TempDir(), "w.log")
	stop := startShellWriter(t, path)
	windows := rotateUntil(t, path, 4<<10, generations, 20)
	written := stop()
	lost, torn := checkStream(t, path, generations, written)
	t.Logf("%d lines over %d rotations: %d lost at rotation boundaries, %d of them torn", written, len(windows), len(lost), torn)
}

// TestRotateLosesOnlyInWindow writes numbered lines from this process,
// timing every write, and checks that each lost line was being written
// during some rotation's loss window (its final drain and truncate), so
// the loss is bounded by that window however long the scheduler makes it.
func TestRotateLosesOnlyInWindow(t *testing.T) {
	const generations = 1000
	path := filepath.Join(t.TempDir(), "w.log")
	w, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var writes []window // writes[i] is when line i was written
	stop, stopped := make(chan struct{}), make(chan error, 1)
	go func() {
		var line []byte
		for i := 0; ; i++ {
			select {
			case <-stop:
				stopped <- nil
				return
			default:
			}
			line = strconv.AppendInt(append(line[:0], "line "...), int64(i), 10)
			line = append(line, '\n')
			start := time.Now()
			if _, err := w.Write(line); err != nil {
				stopped <- err
				return
			}
			writes = append(writes, window{start, time.Now()})
		}
	}()
	windows := rotateUntil(t, path, 4<<10, generations, 20)
	close(stop)
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}

	lost, torn := checkStream(t, path, generations, len(writes))
	for _, n := range lost {
		if !slices.ContainsFunc(windows, writes[n].overlaps) {
			t.Errorf("line %d was lost but written outside every loss window", n)
		}
	}
	t.Logf("%d lines over %d rotations: %d lost, %d of them torn, all inside a loss window", len(writes), len(windows), len(lost), torn)
}

func assertNoTempFiles(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".rotating") {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
}
