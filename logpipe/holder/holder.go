// Package holder is the log holder, the process that keeps the read ends
// of the workloads' log pipes while no daemon runs, and the protocol its
// daemon speaks to it (package logpipe is the daemon's side). It links
// the standard library and x/sys/unix alone: cmd/flyd-log-holder, which
// lives as long as the workloads, is this package and nothing more.
package holder

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// idleExit is how long a holder stays once no daemon is connected and
// every pipe it holds has lost its writers: a daemon that restarts comes
// back well within it, and one that never does leaves no process behind
// for ever. A holder with nothing to hold leaves as its daemon does.
var idleExit = time.Minute

// Serve is the holder: it listens on socket (0600) and keeps the read
// ends daemons Send it until told to drop them. It returns once idle
// (see idleExit), when socket no longer names its socket (the run dir
// was removed or taken over), or when ctx is done; it removes its socket
// first, so that no daemon reaches a holder on its way out.
func Serve(ctx context.Context, socket string) error {
	old := unix.Umask(0o177)
	l, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: socket, Net: "unixpacket"})
	unix.Umask(old)
	if err != nil {
		return err
	}
	l.SetUnlinkOnClose(false)
	defer l.Close()
	mine, err := os.Stat(socket)
	if err != nil {
		return err
	}
	h := &holder{fds: map[string]int{}, since: time.Now()}
	defer h.closeAll()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		<-ctx.Done()
		if fi, err := os.Stat(socket); err == nil && os.SameFile(fi, mine) {
			_ = os.Remove(socket)
		}
		l.Close()
	}()
	go h.watch(ctx, cancel, socket, mine)
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := l.AcceptUnix()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			continue
		}
		if PeerAllowed(c) != nil {
			c.Close()
			continue
		}
		h.connected(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if h.connected(-1) {
					cancel() // nothing to hold, no daemon
				}
			}()
			defer c.Close()
			go func() {
				<-ctx.Done()
				c.Close()
			}()
			h.serve(c)
		}()
	}
}

// holder is the holder process's state, shared by the goroutines serving
// its connections and its watch.
type holder struct {
	// mu guards fds, conns and since; it is held while the descriptors
	// are polled (idle) and closed, never while one is sent (fetch).
	mu    sync.Mutex
	fds   map[string]int
	conns int
	since time.Time // when it last had a daemon
}

// connected counts a daemon's connection in or out, and reports whether
// the holder is left with neither a daemon nor a pipe.
func (h *holder) connected(d int) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.conns += d
	h.since = time.Now()
	return h.conns == 0 && len(h.fds) == 0
}

func (h *holder) closeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for k, fd := range h.fds {
		unix.Close(fd)
		delete(h.fds, k)
	}
}

// watch ends the holder when it is idle or its socket is gone.
func (h *holder) watch(ctx context.Context, stop func(), socket string, mine os.FileInfo) {
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if fi, err := os.Stat(socket); err != nil || !os.SameFile(fi, mine) {
			stop()
			return
		}
		if h.idle() {
			stop()
			return
		}
	}
}

// idle: no daemon for idleExit, and no pipe that a writer still holds.
func (h *holder) idle() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.conns > 0 || time.Since(h.since) < idleExit {
		return false
	}
	pfds := make([]unix.PollFd, 0, len(h.fds))
	for _, fd := range h.fds {
		pfds = append(pfds, unix.PollFd{Fd: int32(fd)})
	}
	if len(pfds) > 0 {
		if _, err := unix.Poll(pfds, 0); err != nil {
			return false
		}
	}
	for _, p := range pfds {
		if p.Revents&unix.POLLHUP == 0 {
			return false
		}
	}
	return true
}

func (h *holder) serve(c *net.UnixConn) {
	for {
		op, keys, fds, err := Recv(c, time.Time{})
		if err != nil {
			return
		}
		var reply error
		switch op {
		case OpPut:
			reply = h.put(keys, fds)
		case OpDrop:
			CloseAll(fds)
			h.drop(keys)
		case OpFetch:
			CloseAll(fds)
			if err := h.fetch(c); err != nil {
				return
			}
			continue
		default:
			CloseAll(fds)
			reply = fmt.Errorf("unknown operation %q", op)
		}
		if reply != nil {
			err = Send(c, OpErr, []string{reply.Error()}, nil)
		} else {
			err = Send(c, OpOK, nil, nil)
		}
		if err != nil {
			return
		}
	}
}

func (h *holder) put(keys []string, fds []int) error {
	if len(keys) != len(fds) {
		CloseAll(fds)
		return fmt.Errorf("%d keys and %d descriptors", len(keys), len(fds))
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, k := range keys {
		if old, ok := h.fds[k]; ok {
			unix.Close(old)
		}
		h.fds[k] = fds[i]
	}
	return nil
}

func (h *holder) drop(keys []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, k := range keys {
		if fd, ok := h.fds[k]; ok {
			unix.Close(fd)
			delete(h.fds, k)
		}
	}
}

// fetch sends every read end, in batches; the holder keeps its own.
func (h *holder) fetch(c *net.UnixConn) error {
	h.mu.Lock()
	keys := make([]string, 0, len(h.fds))
	fds := make([]int, 0, len(h.fds))
	for k, fd := range h.fds {
		keys = append(keys, k)
		fds = append(fds, fd)
	}
	h.mu.Unlock()
	// Sent while the holder keeps them: a drop meanwhile would close one
	// under the Send, so drops wait (the daemon asks one thing at a time).
	for len(keys) > 0 {
		n := min(len(keys), MaxFds)
		if err := Send(c, OpFds, keys[:n], fds[:n]); err != nil {
			return err
		}
		keys, fds = keys[n:], fds[n:]
	}
	return Send(c, OpEnd, nil, nil)
}
