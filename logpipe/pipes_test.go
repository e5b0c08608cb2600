package logpipe

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/flyd-dev/flyd/internal/testenv"
	"github.com/flyd-dev/flyd/logfile"
)

// lines is a shell loop that prints n numbered lines as fast as it can.
func lines(n int) *exec.Cmd {
	return exec.Command("sh", "-c", fmt.Sprintf(`i=0; while [ $i -lt %d ]; do echo "line $i"; i=$((i+1)); done`, n))
}

func checkLines(t *testing.T, path string, n int) {
	t.Helper()
	var b strings.Builder
	for _, p := range []string{path + ".3", path + ".2", path + ".1", path} {
		if data, err := os.ReadFile(p); err == nil {
			b.Write(data)
		}
	}
	var all []string
	sc := bufio.NewScanner(strings.NewReader(b.String()))
	for sc.Scan() {
		all = append(all, sc.Text())
	}
	if len(all) != n {
		t.Fatalf("%d lines in the log, want %d", len(all), n)
	}
	for i, l := range all {
		if l != fmt.Sprintf("line %d", i) {
			t.Fatalf("line %d is %q", i, l)
		}
	}
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestPipeOutlivesItsReader runs a writer through a daemon's Pipes that
// closes (a daemon going away) and is opened again: the writer never
// meets a pipe without a reader, and its log holds every line once.
func TestPipeOutlivesItsReader(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "logs.sock")
	h := &holders{t: t}
	cfg := Config{Socket: sock, StartHolder: h.start(sock)}
	log := logfile.NewLog(filepath.Join(dir, "w.log"), 128<<10, 3)
	defer log.Close()

	p, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	w, err := p.New("w.1", log)
	if err != nil {
		t.Fatal(err)
	}
	const n = 20000
	cmd := lines(n)
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	time.Sleep(5 * time.Millisecond)
	p.Close() // the writer goes on, then waits on its full pipe
	time.Sleep(200 * time.Millisecond)

	p, err = Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	p.Adopt(func(key string) Sink {
		if key != "w.1" {
			t.Errorf("held pipe %q", key)
			return nil
		}
		return log
	})
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the writer: %v", err)
	}
	waitFor(t, "the pipe's end", func() bool { return p.Count() == 0 })
	checkLines(t, log.Path(), n)
	if len(h.started()) != 1 {
		t.Fatalf("%d holders started, want 1", len(h.started()))
	}
}

// TestHolderReplaced kills the holder: Pipes starts another and hands it
// every read end, so that a daemon going away after that still leaves
// the writers a reader.
func TestHolderReplaced(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "logs.sock")
	h := &holders{t: t}
	cfg := Config{Socket: sock, StartHolder: h.start(sock)}
	log := logfile.NewLog(filepath.Join(dir, "w.log"), 1<<20, 3)
	defer log.Close()
	p, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	w, err := p.New("w.1", log)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "-c", `read x; echo "line 0"; echo "line 1"`)
	stdin, _ := cmd.StdinPipe()
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	_ = h.started()[0].Process.Kill()
	_ = h.started()[0].Wait()
	waitFor(t, "a new holder", func() bool { return len(h.started()) == 2 })
	time.Sleep(50 * time.Millisecond)
	p.Close()
	fmt.Fprintln(stdin, "go")
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the writer, with no daemon reading: %v", err)
	}
	p, err = Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	p.Adopt(func(string) Sink { return log })
	waitFor(t, "the pipe's end", func() bool { return p.Count() == 0 })
	checkLines(t, log.Path(), 2)
}

// TestDroppedPipeNotHeld: a pipe that ended is no longer held, and a key
// nothing adopts is closed.
func TestDroppedPipeNotHeld(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "logs.sock")
	h := &holders{t: t}
	cfg := Config{Socket: sock, StartHolder: h.start(sock)}
	log := logfile.NewLog(filepath.Join(dir, "w.log"), 1<<20, 3)
	defer log.Close()
	p, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	done, _ := p.New("done.1", log)
	done.Write([]byte("bye\n"))
	done.Close()
	orphan, _ := p.New("orphan.1", log)
	defer orphan.Close()
	waitFor(t, "the ended pipe", func() bool { return p.Count() == 1 })
	p.Close()
	p, err = Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	p.Adopt(func(k string) Sink { keys = append(keys, k); return nil })
	p.Close()
	if strings.Join(keys, ",") != "orphan.1" {
		t.Fatalf("held %v, want orphan.1 alone", keys)
	}
	p, err = Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	p.Adopt(func(k string) Sink { t.Errorf("%s still held", k); return nil })
}

// TestFullDiskWaits fills the log's disk: the writer waits on its pipe,
// nothing is lost, and once there is room again every line is written.
func TestFullDiskWaits(t *testing.T) {
	disk := testenv.SmallDisk(t, 4<<20)
	dir := t.TempDir()
	sock := filepath.Join(dir, "logs.sock")
	h := &holders{t: t}
	log := logfile.NewLog(filepath.Join(disk, "w.log"), 8<<20, 1)
	defer log.Close()
	p, err := Open(Config{Socket: sock, StartHolder: h.start(sock)})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	filler := filepath.Join(disk, "filler")
	testenv.FillDisk(t, filler)
	w, err := p.New("w.1", log)
	if err != nil {
		t.Fatal(err)
	}
	const n = 20000
	cmd := lines(n)
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		t.Fatalf("the writer ended (%v) with its log's disk full: it should wait", err)
	case <-time.After(1500 * time.Millisecond):
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if err := <-exited; err != nil {
		t.Fatalf("the writer: %v", err)
	}
	waitFor(t, "the pipe's end", func() bool { return p.Count() == 0 })
	checkLines(t, log.Path(), n)
}

// TestDrainWaitsForItsGroup: Drain returns once every pipe of a group has
// ended with all it carried in the log, and waits for no other group's.
func TestDrainWaitsForItsGroup(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "logs.sock")
	h := &holders{t: t}
	p, err := Open(Config{Socket: sock, StartHolder: h.start(sock)})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	logA := logfile.NewLog(filepath.Join(dir, "a.log"), 8<<20, 1)
	defer logA.Close()
	logB := logfile.NewLog(filepath.Join(dir, "b.log"), 8<<20, 1)
	defer logB.Close()
	wa, err := p.New("a.1", logA)
	if err != nil {
		t.Fatal(err)
	}
	wb, err := p.New("b.1", logB)
	if err != nil {
		t.Fatal(err)
	}
	defer wb.Close() // b's writer stays: its group never ends here
	const n = 5000
	cmd := lines(n)
	cmd.Stdout, cmd.Stderr = wa, wa
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	wa.Close()
	if !p.Drain("a", 5*time.Second) {
		t.Fatal("a's pipe did not end")
	}
	checkLines(t, logA.Path(), n) // all of it, at once: nothing to wait for
	if p.Drain("b", 50*time.Millisecond) {
		t.Error("b's pipe, its writer open, was said to have ended")
	}
}

// newRound asks for n pipes while the exchange with the holder is held,
// with meanwhile run in that time, and returns them once every New has
// returned; the test fails on the first error. They are closed at the
// test's end.
func newRound(t *testing.T, p *Pipes, log Sink, n int, meanwhile func()) []*os.File {
	t.Helper()
	p.hmu.Lock()
	meanwhile()
	ws := make([]*os.File, n)
	errs := make(chan error, n)
	for i := range n {
		go func() {
			var err error
			ws[i], err = p.New(fmt.Sprintf("w%d.1", i), log)
			errs <- err
		}()
	}
	waitFor(t, "every pipe queued", func() bool {
		p.qmu.Lock()
		defer p.qmu.Unlock()
		return p.queued != nil && len(p.queued.changes) == n
	})
	p.hmu.Unlock()
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, w := range ws {
			w.Close()
		}
	})
	return ws
}

// heldKeys closes p and says which pipes the holder keeps, as the next
// daemon finds them (and closes them).
func heldKeys(t *testing.T, p *Pipes, cfg Config) map[string]bool {
	t.Helper()
	p.Close()
	p, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	held := map[string]bool{}
	p.Adopt(func(k string) Sink { held[k] = true; return nil })
	return held
}

// TestBurstIsOneExchange: pipes asked for while the holder is busy are
// handed to it together, in one message, and it holds every one of them.
func TestBurstIsOneExchange(t *testing.T) {
	const n = 100
	dir := t.TempDir()
	sock := filepath.Join(dir, "logs.sock")
	h := &holders{t: t}
	cfg := Config{Socket: sock, StartHolder: h.start(sock)}
	log := logfile.NewLog(filepath.Join(dir, "w.log"), 1<<20, 3)
	defer log.Close()
	p, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	before := p.asked.Load()
	newRound(t, p, log, n, func() {}) // the holder busy with an exchange
	if got := p.asked.Load() - before; got != 1 {
		t.Errorf("%d pipes took %d exchanges with the holder, want 1", n, got)
	}
	if held := heldKeys(t, p, cfg); len(held) != n {
		t.Fatalf("the holder keeps %d of the %d pipes", len(held), n)
	}
}

// TestBurstOutlivesItsHolder: a round of pipes sent to a holder that was
// killed goes to a new one, with the pipes being read: every New of the
// round succeeds and the new holder keeps them all.
func TestBurstOutlivesItsHolder(t *testing.T) {
	const n = 20
	dir := t.TempDir()
	sock := filepath.Join(dir, "logs.sock")
	h := &holders{t: t}
	cfg := Config{Socket: sock, StartHolder: h.start(sock)}
	log := logfile.NewLog(filepath.Join(dir, "w.log"), 1<<20, 3)
	defer log.Close()
	p, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	first, err := p.New("first.1", log)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	newRound(t, p, log, n, func() { // the round queues while the holder dies
		_ = h.started()[0].Process.Kill()
		_ = h.started()[0].Wait()
	})
	if len(h.started()) < 2 {
		t.Fatal("no new holder was started")
	}
	if held := heldKeys(t, p, cfg); len(held) != n+1 || !held["first.1"] {
		t.Fatalf("the new holder keeps %d pipes, want the %d of the round and first.1", len(held), n)
	}
}

// takes counts the takes asked of it, and reads what is there.
type takes struct{ n atomic.Int32 }

func (s *takes) Take(fd int, max int) (int, error) {
	s.n.Add(1)
	b := make([]byte, max)
	n, err := unix.Read(fd, b)
	switch {
	case errors.Is(err, unix.EAGAIN):
		return 0, nil
	case err != nil:
		return 0, err
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// TestQuietPipeEndsWithoutATake: a pipe whose writers close with nothing
// written ends without its sink being asked for anything (a log after a
// daemon's restart is opened at its first take); one with bytes left is
// taken until its end.
func TestQuietPipeEndsWithoutATake(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "logs.sock")
	h := &holders{t: t}
	p, err := Open(Config{Socket: sock, StartHolder: h.start(sock)})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var quiet, spoke takes
	q, _ := p.New("quiet.1", &quiet)
	s, _ := p.New("spoke.1", &spoke)
	s.Write([]byte("bye\n"))
	q.Close()
	s.Close()
	waitFor(t, "both pipes to end", func() bool { return p.Count() == 0 })
	if n := quiet.n.Load(); n != 0 {
		t.Errorf("the quiet pipe's sink was asked %d takes, want none", n)
	}
	if n := spoke.n.Load(); n == 0 {
		t.Error("the pipe with bytes left was never taken")
	}
}
