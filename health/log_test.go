package health

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

const pgReady = "database system is ready to accept connections"

// TestLinesPieces: a line is matched whole however its bytes come, and
// only once it has ended or reached the bound.
func TestLinesPieces(t *testing.T) {
	re := regexp.MustCompile(`^[-\d]+ [:.\d]+ UTC \[\d+\] LOG:  ` + pgReady + `$`)
	line := "2026-01-02 03:04:05.678 UTC [4242] LOG:  " + pgReady + "\r\n"
	for cut := 0; cut <= len(line); cut++ {
		l := NewLines(re)
		if l.Write([]byte("starting\nLOG:  redo done\n")) {
			t.Fatal("an earlier line matched")
		}
		first, second := line[:cut], line[cut:]
		got1 := l.Write([]byte(first))
		got2 := l.Write([]byte(second))
		if ended := cut == len(line); got1 != ended || got2 == ended {
			t.Errorf("cut at %d: matched %v then %v; want only once the line ended", cut, got1, got2)
		}
	}
	// Byte by byte, with other lines around it.
	l := NewLines(re)
	matched := -1
	stream := "a\n\nb\r\n" + line + "after\n"
	for i := range len(stream) {
		if l.Write([]byte{stream[i]}) && matched < 0 {
			matched = i
		}
	}
	if want := strings.Index(stream, "\nafter"); matched != want {
		t.Errorf("byte by byte: matched at %d, want at the line's end, %d", matched, want)
	}
	// No end yet: not matched, since the line may go on ("…connections
	// refused").
	if NewLines(regexp.MustCompile(pgReady + "$")).Write([]byte(pgReady)) {
		t.Error("a line without its end matched an anchored pattern")
	}
}

// TestLinesLong: of a long line, the first MaxLineMatched bytes are
// matched, as soon as they have come; the rest is skipped to its end, and
// the next line is matched from its start.
func TestLinesLong(t *testing.T) {
	long := strings.Repeat("x", MaxLineMatched-5) + "ready" + strings.Repeat("y", 3*MaxLineMatched) + "ready"
	if !NewLines(regexp.MustCompile(`ready`)).Write([]byte(long)) {
		t.Error("a pattern within the first 4 KiB of a line that has not ended did not match")
	}
	l := NewLines(regexp.MustCompile(`^ready`))
	far := strings.Repeat("x", MaxLineMatched) + "ready"
	for i := 0; i < len(far); i += 1000 {
		if l.Write([]byte(far[i:min(i+1000, len(far))])) {
			t.Fatal("matched past the bound")
		}
	}
	if l.Write([]byte("\n")) {
		t.Error("the end of a line matched at its bound matched again")
	}
	if !l.Write([]byte("ready\n")) {
		t.Error("the line after a long one is not matched from its start")
	}
	if NewLines(regexp.MustCompile(`y$`)).Write([]byte(strings.Repeat("x", MaxLineMatched) + "y\n")) {
		t.Error("a match beyond the bound, in one piece")
	}
}

// fakeLog is a run's output as Follow gives it: what was written since
// the run began, then what is written next, each piece once, across
// follows cut short by errors.
type fakeLog struct {
	mu      sync.Mutex
	data    []byte
	wake    chan struct{}
	fail    int // follows that fail after giving what there is
	follows int
}

func newFakeLog(earlier string) *fakeLog {
	// A run's own output begins after what earlier runs wrote: Follow
	// starts at the position the run began at.
	return &fakeLog{data: []byte(earlier), wake: make(chan struct{})}
}

func (f *fakeLog) write(s string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.data = append(f.data, s...)
	close(f.wake)
	f.wake = make(chan struct{})
}

// follow starts at from and gives what comes, in pieces of 7 bytes.
func (f *fakeLog) follow(from int) Follow {
	pos := from
	return func(ctx context.Context, out func([]byte) error) error {
		f.mu.Lock()
		f.follows++
		failing := f.fail > 0
		if failing {
			f.fail--
		}
		f.mu.Unlock()
		for {
			f.mu.Lock()
			data, wake := f.data[pos:], f.wake
			f.mu.Unlock()
			for len(data) > 0 {
				n := min(7, len(data))
				if err := out(data[:n]); err != nil {
					return err
				}
				pos += n
				data = data[n:]
			}
			if failing {
				return errors.New("the disk is full")
			}
			select {
			case <-ctx.Done():
				return nil
			case <-wake:
			}
		}
	}
}

type verdict struct {
	healthy bool
	err     error
	at      time.Duration
}

func recordVerdicts() (func(bool, error), func() []verdict) {
	var mu sync.Mutex
	var got []verdict
	began := time.Now()
	return func(ok bool, err error) {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, verdict{ok, err, time.Since(began)})
		}, func() []verdict {
			mu.Lock()
			defer mu.Unlock()
			return append([]verdict(nil), got...)
		}
}

func waitVerdicts(t *testing.T, get func() []verdict, n int) []verdict {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if v := get(); len(v) >= n {
			return v
		}
	}
	t.Fatalf("%d verdicts, want %d", len(get()), n)
	return nil
}

// TestLogCheckCurrentRunOnly: the line an earlier run printed does not
// count; the run's own does, as soon as it is written.
func TestLogCheckCurrentRunOnly(t *testing.T) {
	earlier := "LOG:  " + pgReady + "\nLOG:  received fast shutdown request\n"
	log := newFakeLog(earlier)
	on, got := recordVerdicts()
	c := StartLogCheck(log.follow(len(earlier)), regexp.MustCompile(pgReady), time.Now(), time.Minute, on)
	defer c.Stop()
	log.write("LOG:  starting PostgreSQL 15\nLOG:  database system was shut down at …\n")
	time.Sleep(20 * time.Millisecond)
	if v := got(); len(v) != 0 {
		t.Fatalf("verdicts %+v before the run printed its line", v)
	}
	log.write("LOG:  " + pgReady + "\n")
	if v := waitVerdicts(t, got, 1); !v[0].healthy {
		t.Fatalf("verdict %+v, want healthy", v[0])
	}
}

// TestLogCheckLate: a run that prints no matching line in its time is
// unhealthy then; one that prints it later is healthy then; a read that
// fails is taken up again where it stopped.
func TestLogCheckLate(t *testing.T) {
	defer func(was time.Duration) { followRetry = was }(followRetry)
	followRetry = 10 * time.Millisecond
	log := newFakeLog("")
	log.fail = 2
	on, got := recordVerdicts()
	c := StartLogCheck(log.follow(0), regexp.MustCompile(`^listening on \d+$`), time.Now(), 50*time.Millisecond, on)
	defer c.Stop()
	log.write("starting\nlisten")
	v := waitVerdicts(t, got, 1)
	if v[0].healthy || v[0].at < 50*time.Millisecond || !strings.Contains(v[0].err.Error(), "within 50ms") {
		t.Fatalf("verdict %+v, want unhealthy after 50ms", v[0])
	}
	log.write("ing on 8080\n")
	v = waitVerdicts(t, got, 2)
	if !v[1].healthy || len(v) != 2 {
		t.Fatalf("verdicts %+v, want unhealthy then healthy", v)
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	if log.follows != 3 {
		t.Errorf("%d follows, want 3: two that failed and the one that matched", log.follows)
	}
}

// TestLogCheckAdoptedLate: a run adopted after its time is judged at once.
func TestLogCheckAdoptedLate(t *testing.T) {
	on, got := recordVerdicts()
	c := StartLogCheck(newFakeLog("").follow(0), regexp.MustCompile(`x`), time.Now().Add(-time.Hour), time.Minute, on)
	defer c.Stop()
	if v := waitVerdicts(t, got, 1); v[0].healthy || v[0].at > time.Second {
		t.Fatalf("verdict %+v, want unhealthy at once", v[0])
	}
	c.Stop()
}

// BenchmarkLines measures the matcher on a server's usual lines, for
// the cost of a log check while it waits for its line.
func BenchmarkLines(b *testing.B) {
	chunk := []byte(strings.Repeat("2026-01-02 03:04:05.678 UTC [4242] LOG:  checkpoint starting: time\n", 1000))
	for _, pat := range []string{pgReady, `ready to accept connections$`, `(?i)listening on .*:\d+`} {
		b.Run(pat, func(b *testing.B) {
			l := NewLines(regexp.MustCompile(pat))
			b.SetBytes(int64(len(chunk)))
			for b.Loop() {
				if l.Write(chunk) {
					b.Fatal("matched")
				}
			}
		})
	}
}
