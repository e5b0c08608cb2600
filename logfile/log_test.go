package logfile

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// collect reads q from l whole (not following) and returns the records,
// their data copied.
func collect(t *testing.T, l *Log, q Query) []Record {
	t.Helper()
	var recs []Record
	err := l.Read(context.Background(), q, SinkFunc(func(r Record) error {
		r.Data = append([]byte(nil), r.Data...)
		recs = append(recs, r)
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

func joined(recs []Record) string {
	var b strings.Builder
	for _, r := range recs {
		b.Write(r.Data)
	}
	return b.String()
}

// checkContiguous fails unless each record starts where the one before
// it ended.
func checkContiguous(t *testing.T, recs []Record) {
	t.Helper()
	for i := 1; i < len(recs); i++ {
		if want := recs[i-1].Pos + int64(len(recs[i-1].Data)); recs[i].Pos != want {
			t.Fatalf("record %d at %d, want %d (after %q)", i, recs[i].Pos, want, recs[i-1].Data)
		}
	}
}

func all() Query { return Query{From: ptr[int64](0)} }

func TestLogPositionsSurviveRotation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.log")
	l := NewLog(path, 8, 3)
	defer l.Close()
	var want strings.Builder
	for _, line := range []string{"one\n", "two\n", "three\n", "four\n", "five\n"} {
		appendFile(t, path, line)
		want.WriteString(line)
		if _, err := l.Mark(); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Rotate(nil); err != nil {
			t.Fatal(err)
		}
	}
	recs := collect(t, l, all())
	checkContiguous(t, recs)
	if got := joined(recs); got != want.String() {
		t.Fatalf("read %q, want %q", got, want.String())
	}
	if recs[0].Pos != 0 {
		t.Fatalf("first position %d, want 0 (nothing was dropped)", recs[0].Pos)
	}
	// A position names the same byte after a restart of the daemon: a
	// new Log on the same files.
	l.Close()
	again := NewLog(path, 8, 3)
	defer again.Close()
	from := recs[2].Pos
	if got, want := joined(collect(t, again, Query{From: &from})), want.String()[from:]; got != want {
		t.Fatalf("from %d read %q, want %q", from, got, want)
	}
	// The tail counts lines across generations.
	if got := joined(collect(t, again, Query{Tail: 2})); got != "four\nfive\n" {
		t.Fatalf("tail 2 = %q", got)
	}
}

func TestLogDropsWhatRotationDrops(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.log")
	l := NewLog(path, 4, 1)
	defer l.Close()
	for _, line := range []string{"aaaa\n", "bbbb\n", "cccc\n"} {
		appendFile(t, path, line)
		if _, err := l.Mark(); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Rotate(nil); err != nil {
			t.Fatal(err)
		}
	}
	// One generation kept: the oldest byte left is cccc's, at 10; a
	// position before it reads from there.
	recs := collect(t, l, Query{From: ptr[int64](0)})
	if got := joined(recs); got != "cccc\n" || recs[0].Pos != 10 {
		t.Fatalf("read %q at %d, want cccc at 10", got, recs[0].Pos)
	}
	// Marks of dropped bytes are dropped too; the one of cccc stays.
	x, err := l.index()
	if err != nil {
		t.Fatal(err)
	}
	if x.n != 1 || x.base != 15 {
		t.Fatalf("index has %d marks and base %d, want 1 and 15", x.n, x.base)
	}
}

func TestLogDatesLinesAndReadsSince(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.log")
	l := NewLog(path, 0, 3)
	defer l.Close()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	write := func(s string, at time.Time) {
		appendFile(t, path, s)
		if err := os.Chtimes(path, at, at); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Mark(); err != nil {
			t.Fatal(err)
		}
	}
	write("early 1\nearly 2\n", t0)
	write("late\n", t0.Add(time.Minute))
	appendFile(t, path, "unmarked\n")

	recs := collect(t, l, all())
	if len(recs) != 4 {
		t.Fatalf("%d records, want 4: %q", len(recs), joined(recs))
	}
	for i, want := range []time.Time{t0, t0, t0.Add(time.Minute)} {
		if !recs[i].Time.Equal(want) {
			t.Errorf("%q dated %v, want %v", recs[i].Data, recs[i].Time, want)
		}
	}
	if since := time.Since(recs[3].Time); since < 0 || since > time.Minute {
		t.Errorf("a line past the last mark is dated %v, want about now", recs[3].Time)
	}

	got := joined(collect(t, l, Query{Tail: -1, Since: t0.Add(time.Second)}))
	if got != "late\nunmarked\n" {
		t.Fatalf("since t0+1s read %q", got)
	}
	if got := joined(collect(t, l, Query{Tail: 1, Since: t0.Add(-time.Hour)})); got != "unmarked\n" {
		t.Fatalf("since and tail read %q, want the last line", got)
	}
	if got := joined(collect(t, l, Query{Tail: -1, Since: t0.Add(-time.Hour)})); !strings.HasPrefix(got, "early 1\n") {
		t.Fatalf("since before every mark read %q, want everything", got)
	}
}

// A reader placing itself holds rotation off: a rotation then is left
// for the next look, and the reader's positions stay true.
func TestLogRotationWaitsForAReader(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.log")
	l := NewLog(path, 4, 3)
	defer l.Close()
	appendFile(t, path, "first line\n")
	inside, release := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = l.Read(context.Background(), all(), SinkFunc(func(Record) error {
			close(inside)
			<-release
			return nil
		}))
	}()
	<-inside
	rotated, err := l.Rotate(nil)
	close(release)
	wg.Wait()
	if err != nil || rotated {
		t.Fatalf("Rotate during a read = %v, %v; want false, nil", rotated, err)
	}
	if rotated, err := l.Rotate(nil); err != nil || !rotated {
		t.Fatalf("Rotate after it = %v, %v; want true, nil", rotated, err)
	}
}

// A follower that stops and comes back with the next position misses
// and repeats nothing, though the log rotated and the daemon's Log is a
// new one meanwhile.
func TestLogFollowResumes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.log")
	l := NewLog(path, 16, 5)
	appendFile(t, path, "before\n")

	var mu sync.Mutex
	var recs []Record
	emit := func(r Record) error {
		mu.Lock()
		defer mu.Unlock()
		r.Data = append([]byte(nil), r.Data...)
		recs = append(recs, r)
		return nil
	}
	seen := func() string {
		mu.Lock()
		defer mu.Unlock()
		return joined(recs)
	}
	follow := func(l *Log, q Query) (stop func()) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- l.Read(ctx, q, SinkFunc(emit)) }()
		return func() {
			cancel()
			if err := <-done; err != nil {
				t.Error(err)
			}
		}
	}
	waitFor := func(want string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for seen() != want {
			if time.Now().After(deadline) {
				t.Fatalf("followed %q, want %q", seen(), want)
			}
			time.Sleep(time.Millisecond)
		}
	}

	stop := follow(l, Query{Tail: -1, Follow: true})
	appendFile(t, path, "during 1\n")
	waitFor("before\nduring 1\n")
	stop()
	l.Close()

	// While nobody follows: more lines and two rotations.
	appendFile(t, path, "while away 1\n")
	l = NewLog(path, 16, 5)
	defer l.Close()
	for _, s := range []string{"while away 2\n", "while away 3\n"} {
		if _, err := l.Rotate(nil); err != nil {
			t.Fatal(err)
		}
		appendFile(t, path, s)
	}
	mu.Lock()
	last := recs[len(recs)-1]
	mu.Unlock()
	stop = follow(l, Query{From: ptr(last.Pos + int64(len(last.Data))), Follow: true})
	defer stop()
	appendFile(t, path, "after\n")
	waitFor("before\nduring 1\nwhile away 1\nwhile away 2\nwhile away 3\nafter\n")
	mu.Lock()
	var data []Record
	for _, r := range recs {
		if len(r.Data) > 0 {
			data = append(data, r)
		}
	}
	mu.Unlock()
	checkContiguous(t, data)
}

func TestLogRemove(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "w.log")
	l := NewLog(path, 4, 2)
	appendFile(t, path, "some lines\n")
	if _, err := l.Mark(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Rotate(nil); err != nil {
		t.Fatal(err)
	}
	if err := l.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Mark(); err != nil {
		t.Fatal(err) // nothing to mark: no file
	}
	appendFile(t, path, "a late write\n") // a workload still writing
	if _, err := l.Mark(); !errors.Is(err, ErrRemoved) {
		t.Fatalf("Mark after Remove = %v, want %v", err, ErrRemoved)
	}
	os.Remove(path)
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("left behind: %v", ents)
	}
}

func TestForeignIndexRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.log")
	writeFile(t, indexPath(path), "not an index, and long enough")
	l := NewLog(path, 0, 1)
	defer l.Close()
	if _, err := l.Mark(); err != nil {
		t.Fatal(err) // no live file: nothing read
	}
	appendFile(t, path, "x\n")
	if _, err := l.Mark(); err == nil || !strings.Contains(err.Error(), "not a flyd log index") {
		t.Fatalf("Mark with a foreign index = %v", err)
	}
	if got := readFile(t, indexPath(path)); got != "not an index, and long enough" {
		t.Fatalf("foreign index rewritten: %q", got)
	}
}
