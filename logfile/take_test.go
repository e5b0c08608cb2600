package logfile

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// onDisk is what the log at path takes on disk, in blocks, its index
// and every generation included.
func onDisk(t *testing.T, path string) int64 {
	t.Helper()
	matches, _ := filepath.Glob(path + "*")
	total := int64(0)
	for _, m := range matches {
		var st unix.Stat_t
		if err := unix.Stat(m, &st); err == nil {
			total += st.Blocks * 512
		}
	}
	return total
}

func takeAll(t *testing.T, l *Log, r *os.File) {
	t.Helper()
	for {
		n, err := l.Take(int(r.Fd()), 1<<20)
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			time.Sleep(time.Millisecond)
		}
	}
}

func TestTakeBoundsTheLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.log")
	const maxSize, gens = 16 << 10, 2
	l := NewLog(path, maxSize, gens)
	defer l.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var want strings.Builder
	go func() {
		defer w.Close()
		for i := 0; i < 20000; i++ {
			fmt.Fprintf(w, "line %d\n", i)
		}
		// An endless line, and writes of a byte: a mark each.
		w.Write([]byte(strings.Repeat("x", 100<<10)))
		for i := 0; i < 3000; i++ {
			w.Write([]byte{'y'})
		}
	}()
	for i := 0; i < 20000; i++ {
		fmt.Fprintf(&want, "line %d\n", i)
	}
	want.WriteString(strings.Repeat("x", 100<<10) + strings.Repeat("y", 3000))
	bound := int64(maxSize*(gens+1) + headerSize + (gens+2)*4096)
	done := make(chan struct{})
	var worst int64
	go func() {
		defer close(done)
		for {
			n, err := l.Take(int(r.Fd()), 1<<20)
			if err == io.EOF {
				return
			}
			if err != nil {
				t.Error(err)
				return
			}
			worst = max(worst, onDisk(t, path))
			if n == 0 {
				time.Sleep(100 * time.Microsecond)
			}
		}
	}()
	<-done
	if worst > bound {
		t.Errorf("the log took %d bytes on disk, over the bound %d", worst, bound)
	}
	recs := collect(t, l, all())
	checkContiguous(t, recs)
	got := joined(recs)
	if !strings.HasSuffix(want.String(), got) || len(got) < maxSize*gens {
		t.Fatalf("read %d bytes, not the end of what was written", len(got))
	}
	if end := recs[len(recs)-1].Pos + int64(len(recs[len(recs)-1].Data)); end != int64(want.Len()) {
		t.Fatalf("the log ends at %d, want %d", end, want.Len())
	}
	if _, err := os.Stat(path + ".3"); err == nil {
		t.Fatal("a third generation with 2 kept")
	}
}

func TestTakeDatesEachRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.log")
	l := NewLog(path, 1<<20, 2)
	defer l.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var before, after []time.Time
	for i := 0; i < 3; i++ {
		fmt.Fprintf(w, "line %d\n", i)
		before = append(before, time.Now())
		for {
			n, err := l.Take(int(r.Fd()), 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			if n > 0 {
				break
			}
		}
		after = append(after, time.Now())
		time.Sleep(20 * time.Millisecond)
	}
	w.Close()
	takeAll(t, l, r)
	recs := collect(t, l, all())
	if len(recs) != 3 {
		t.Fatalf("%d records, want 3", len(recs))
	}
	for i, rec := range recs {
		if rec.Time.Before(before[i]) || rec.Time.After(after[i]) {
			t.Errorf("line %d dated %v, read between %v and %v", i, rec.Time, before[i], after[i])
		}
	}
}

// TestFollowAcrossRenames follows a log the daemon writes and rotates by
// renaming many times: every line once, in order.
func TestFollowAcrossRenames(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.log")
	l := NewLog(path, 8<<10, 3)
	defer l.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	var got strings.Builder
	followed := make(chan error, 1)
	go func() {
		followed <- l.Read(ctx, Query{Tail: 0, Follow: true}, SinkFunc(func(r Record) error {
			mu.Lock()
			got.Write(r.Data)
			mu.Unlock()
			return nil
		}))
	}()
	time.Sleep(20 * time.Millisecond)
	var want strings.Builder
	const lines = 5000
	go func() {
		defer w.Close()
		for i := 0; i < lines; i++ {
			fmt.Fprintf(w, "line %d\n", i)
			if i%50 == 0 {
				time.Sleep(time.Millisecond)
			}
		}
	}()
	for i := 0; i < lines; i++ {
		fmt.Fprintf(&want, "line %d\n", i)
	}
	takeAll(t, l, r)
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		g := got.String()
		mu.Unlock()
		if g == want.String() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("followed %d bytes, want %d; first difference at %d", len(g), want.Len(), firstDiff(g, want.String()))
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-followed; err != nil {
		t.Fatal(err)
	}
}

func firstDiff(a, b string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func TestAppendAfterRemoveRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.log")
	l := NewLog(path, 1<<20, 2)
	if err := l.Append([]byte("flyd: start failed\n")); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, path); got != "flyd: start failed\n" {
		t.Fatalf("log holds %q", got)
	}
	if err := l.Remove(); err != nil {
		t.Fatal(err)
	}
	if err := l.Append([]byte("late\n")); err == nil {
		t.Fatal("Append after Remove succeeded")
	}
	if _, err := os.Stat(path); err == nil {
		t.Fatal("the log came back after Remove")
	}
}

// TestRotationCutShortSettles: a daemon killed inside a renaming
// rotation, after the rename and before the index's rewrite (with the
// next live file made or not), leaves positions that the next Log puts
// right: every byte keeps its position.
func TestRotationCutShortSettles(t *testing.T) {
	for _, made := range []bool{false, true} {
		t.Run(fmt.Sprintf("next live file made %v", made), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "w.log")
			l := NewLog(path, 8<<10, 3)
			var want strings.Builder
			for i := 0; i < 1500; i++ {
				line := fmt.Sprintf("line %d\n", i)
				want.WriteString(line)
				if err := l.Append([]byte(line)); err != nil {
					t.Fatal(err)
				}
			}
			if _, ok := filePos(path); !ok {
				t.Skip("no user extended attributes on this file system")
			}
			l.Close()
			// The rotation's renames, and no more.
			x, err := openIndex(path)
			if err != nil {
				t.Fatal(err)
			}
			fi, _ := os.Stat(path)
			if err := shiftGenerations(path, 3); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(path, genPath(path, 1)); err != nil {
				t.Fatal(err)
			}
			if made {
				f, _, err := createLive(path)
				if err != nil {
					t.Fatal(err)
				}
				setPos(f, x.livePos()+fi.Size())
				f.Close()
			}
			again := NewLog(path, 8<<10, 3)
			defer again.Close()
			if err := again.Append([]byte("after\n")); err != nil {
				t.Fatal(err)
			}
			want.WriteString("after\n")
			recs := collect(t, again, all())
			checkContiguous(t, recs)
			end := recs[len(recs)-1].Pos + int64(len(recs[len(recs)-1].Data))
			if end != int64(want.Len()) {
				t.Fatalf("the log ends at position %d, want %d", end, want.Len())
			}
			if got := joined(recs); !strings.HasSuffix(want.String(), got) {
				t.Fatalf("what the log holds is not the end of what was written")
			}
			from := recs[len(recs)-3].Pos
			if got := joined(collect(t, again, Query{From: &from})); got != want.String()[from:] {
				t.Fatalf("from %d: %q, want %q", from, got, want.String()[from:])
			}
		})
	}
}
