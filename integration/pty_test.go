package integration

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// ptyTerm is a pseudo-terminal of a test's own: a program runs with its
// other side as stdin, stdout, stderr and controlling terminal, and the
// test reads every byte it writes. Like a plain pty (and many a CI's
// terminal) it answers none of the queries a program asks a terminal.
type ptyTerm struct {
	t      *testing.T
	master *os.File
	cmd    *exec.Cmd
	exited chan struct{}
	read   chan struct{} // closed once the reader read all there is

	mu      sync.Mutex
	out     bytes.Buffer
	changed chan struct{} // closed and replaced on every read
}

// startPty runs cmd on a new pty of cols×rows, in a session of its own
// whose controlling terminal the pty is. The environment's TERM is term
// and CI is unset (termenv takes CI to mean no terminal at all).
func startPty(t *testing.T, cols, rows int, term string, cmd *exec.Cmd) *ptyTerm {
	t.Helper()
	mfd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	master := os.NewFile(uintptr(mfd), "/dev/ptmx")
	if err := unix.IoctlSetPointerInt(mfd, unix.TIOCSPTLCK, 0); err != nil {
		master.Close()
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(mfd, unix.TIOCGPTN)
	if err != nil {
		master.Close()
		t.Fatal(err)
	}
	slave, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		master.Close()
		t.Fatal(err)
	}
	defer slave.Close()
	if err := unix.IoctlSetWinsize(int(slave.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: uint16(rows), Col: uint16(cols)}); err != nil {
		master.Close()
		t.Fatal(err)
	}
	var env []string
	for _, kv := range cmd.Env {
		if !strings.HasPrefix(kv, "TERM=") && !strings.HasPrefix(kv, "CI=") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, "TERM="+term)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	p := &ptyTerm{t: t, master: master, cmd: cmd, exited: make(chan struct{}), read: make(chan struct{}), changed: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		master.Close()
		t.Fatal(err)
	}
	go func() { _ = cmd.Wait(); close(p.exited) }()
	go func() {
		defer close(p.read)
		buf := make([]byte, 32<<10)
		for {
			n, err := master.Read(buf)
			p.mu.Lock()
			p.out.Write(buf[:n])
			close(p.changed)
			p.changed = make(chan struct{})
			p.mu.Unlock()
			if err != nil {
				return // EIO once no one holds the other side
			}
		}
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = cmd.Process.Kill()
			<-p.exited
		}
		master.Close()
		<-p.read
	})
	return p
}

// output is all the program wrote so far.
func (p *ptyTerm) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// waitOutput waits up to within for the output to satisfy ok, and
// returns it; the test fails if it does not.
func (p *ptyTerm) waitOutput(what string, within time.Duration, ok func(out string) bool) string {
	p.t.Helper()
	deadline := time.After(within)
	for {
		p.mu.Lock()
		out, changed := p.out.String(), p.changed
		p.mu.Unlock()
		if ok(out) {
			return out
		}
		select {
		case <-changed:
		case <-deadline:
			p.t.Fatalf("%s: not within %s; the program wrote %q", what, within, out)
		}
	}
}

// send types s on the terminal.
func (p *ptyTerm) send(s string) {
	p.t.Helper()
	if _, err := p.master.WriteString(s); err != nil {
		p.t.Fatal(err)
	}
}

// wait waits for the program to exit, and for what it wrote to be read
// (the reader's EIO: no one holds the other side any more), and returns
// its exit code.
func (p *ptyTerm) wait() int {
	p.t.Helper()
	timeout := time.After(waitFor)
	for _, ch := range []chan struct{}{p.exited, p.read} {
		select {
		case <-ch:
		case <-timeout:
			p.t.Fatalf("%s did not exit within %s; it wrote %q", p.cmd.Path, waitFor, p.output())
		}
	}
	return p.cmd.ProcessState.ExitCode()
}
