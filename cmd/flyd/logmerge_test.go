package main

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/flyd-dev/flyd/api"
)

func at(sec int) time.Time { return time.Date(2026, 12, 1, 10, 0, sec, 0, time.UTC) }

// fakeSources replays, per source, records and the items between them.
func fakeSources(items [][]logItem, errs []error) func(context.Context, int, func(logItem) error) error {
	return func(ctx context.Context, i int, out func(logItem) error) error {
		for _, it := range items[i] {
			it.src = i
			if err := out(it); err != nil {
				return err
			}
		}
		if errs != nil {
			return errs[i]
		}
		return nil
	}
}

func rec(sec int, data string) logItem {
	return logItem{kind: record, rec: api.LogRecord{Time: at(sec), Data: []byte(data)}}
}

func TestMergeLogsInTimeOrder(t *testing.T) {
	var out bytes.Buffer
	p := newLogPrinter(&out, []string{"a", "bb"}, true, false)
	err := mergeLogs(context.Background(), 2, p, fakeSources([][]logItem{
		{rec(1, "a1\n"), rec(3, "a3 begun "), rec(4, "and ended\n"), rec(9, "a9 unended")},
		{rec(2, "b2\n"), rec(3, "b3\n"), rec(5, "b5\n")},
	}, nil))
	if err != nil {
		t.Fatal(err)
	}
	want := "a  | a1\nbb | b2\nbb | b3\na  | a3 begun and ended\nbb | b5\na  | a9 unended\n"
	if out.String() != want {
		t.Fatalf("merged\n%s\nwant\n%s", out.String(), want)
	}
}

// Past what each log held when it was read, lines go out as they come:
// a quiet source does not hold the others back.
func TestMergeLogsFollowsAsTheyCome(t *testing.T) {
	var out bytes.Buffer
	release := make(chan struct{})
	// Written on the merging goroutine: b's new line lets a go on.
	w := writerFunc(func(p []byte) (int, error) {
		if bytes.Contains(p, []byte("new")) {
			close(release)
		}
		return out.Write(p)
	})
	p := newLogPrinter(w, []string{"a", "b"}, true, true)
	err := mergeLogs(context.Background(), 2, p, func(ctx context.Context, i int, emit func(logItem) error) error {
		if i == 0 {
			// Caught up and quiet until b's new line has been printed.
			if err := emit(logItem{src: 0, kind: caughtUp}); err != nil {
				return err
			}
			<-release
			return emit(logItem{src: 0, kind: record, rec: api.LogRecord{Time: at(1), Data: []byte("late but older\n")}})
		}
		for _, it := range []logItem{rec(5, "history\n"), {kind: caughtUp}, rec(6, "new\n")} {
			it.src = 1
			if err := emit(it); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := "b | 2026-12-01T10:00:05.000Z history\nb | 2026-12-01T10:00:06.000Z new\na | 2026-12-01T10:00:01.000Z late but older\n"
	if out.String() != want {
		t.Fatalf("printed\n%s\nwant\n%s", out.String(), want)
	}
}

func TestMergeLogsEndsAllOnAFailure(t *testing.T) {
	refused := errors.New("nope: not found")
	p := newLogPrinter(&bytes.Buffer{}, []string{"a", "nope"}, true, false)
	err := mergeLogs(context.Background(), 2, p, func(ctx context.Context, i int, emit func(logItem) error) error {
		if i == 1 {
			return refused
		}
		<-ctx.Done() // a follower that would run forever
		return nil
	})
	if !errors.Is(err, refused) {
		t.Fatalf("mergeLogs = %v, want %v", err, refused)
	}
}

func TestOneLogPassesThrough(t *testing.T) {
	var out bytes.Buffer
	p := newLogPrinter(&out, []string{"a"}, false, false)
	for _, d := range []string{"a prompt> ", "typed\n", "next\n"} {
		if err := p.record(0, api.LogRecord{Data: []byte(d)}); err != nil {
			t.Fatal(err)
		}
		if !bytes.HasSuffix(out.Bytes(), []byte(d)) {
			t.Fatalf("after %q printed %q: held back", d, out.String())
		}
	}
	var stamped bytes.Buffer
	p = newLogPrinter(&stamped, []string{"a"}, false, true)
	for i, d := range []string{"part ", "one\n", "two\n"} {
		_ = p.record(0, api.LogRecord{Time: at(i), Data: []byte(d)})
	}
	if want := "2026-12-01T10:00:00.000Z part one\n2026-12-01T10:00:02.000Z two\n"; stamped.String() != want {
		t.Fatalf("stamped %q, want %q", stamped.String(), want)
	}
}

func TestParseSince(t *testing.T) {
	now := at(30)
	for in, want := range map[string]time.Time{
		"10s":                  at(20),
		"2026-12-01T10:00:05Z": at(5),
	} {
		if got, err := parseSince(in, now); err != nil || !got.Equal(want) {
			t.Errorf("parseSince(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"-1m", "yesterday", ""} {
		if _, err := parseSince(bad, now); err == nil {
			t.Errorf("parseSince(%q) took it", bad)
		}
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
