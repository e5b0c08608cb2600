package logpipe

import (
	"errors"
	"fmt"
	"net"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/flyd-dev/flyd/logpipe/holder"
)

// The daemon's side of the holder: one connection, one exchange at a
// time (hmu), its end seen by the pipes' epoll instance. Changes to what
// the holder keeps are queued (tell) and sent by whoever holds the
// exchange next, all that queued meanwhile in as few messages as they fit:
// a burst of starts or of ends is a few exchanges, not one each.

// change is one change to what the holder keeps: a read end to hold
// (holder.OpPut, with fd) or a key to close (holder.OpDrop).
type change struct {
	op  byte
	key string
	fd  int
}

// round is the changes queued while no exchange took them, sent together.
type round struct {
	changes []change
	done    chan struct{}
	err     error
}

// tell queues changes, all in one round, for the next exchange.
func (p *Pipes) tell(cs ...change) *round {
	p.qmu.Lock()
	defer p.qmu.Unlock()
	if p.queued == nil {
		p.queued = &round{done: make(chan struct{})}
	}
	p.queued.changes = append(p.queued.changes, cs...)
	return p.queued
}

// exchange queues changes and returns once the holder answered them:
// sent by this caller, or by one that held the exchange before it.
func (p *Pipes) exchange(cs ...change) error {
	r := p.tell(cs...)
	p.hmu.Lock()
	p.sendQueued()
	p.hmu.Unlock()
	<-r.done // sent by now: a round is taken and answered under hmu
	return r.err
}

// dropLater has the holder close key's read end without waiting for it:
// the reading loop is not held up by the holder.
func (p *Pipes) dropLater(key string) {
	p.tell(change{op: holder.OpDrop, key: key, fd: -1})
	if p.flushing.CompareAndSwap(false, true) {
		go func() {
			p.hmu.Lock()
			defer p.hmu.Unlock()
			p.flushing.Store(false)
			p.sendQueued()
		}()
	}
}

// sendQueued sends the queued round, in order. A round the holder did
// not answer (it was killed) is a new holder's, with every pipe being
// read and the round's own read ends; its drops are moot there. The caller
// holds hmu.
func (p *Pipes) sendQueued() {
	p.qmu.Lock()
	r := p.queued
	p.queued = nil
	p.qmu.Unlock()
	if r == nil {
		return
	}
	defer close(r.done)
	if r.err = p.send(r.changes); r.err == nil {
		return
	}
	p.mu.Lock()
	closing := p.closing
	p.mu.Unlock()
	if closing {
		return
	}
	var keys []string
	var fds []int
	for _, c := range r.changes {
		if c.op == holder.OpPut {
			keys, fds = append(keys, c.key), append(fds, c.fd)
		}
	}
	p.closeHolder()
	if r.err = p.connect(); r.err == nil {
		r.err = p.reput(keys, fds)
	}
}

// send sends changes in order, a message for each run of one operation,
// within a message's bounds. The caller holds hmu.
func (p *Pipes) send(cs []change) error {
	for len(cs) > 0 {
		n, size := 0, 1
		for n < len(cs) && n < holder.MaxFds && cs[n].op == cs[0].op && size+len(cs[n].key)+1 <= holder.MaxMsg {
			size += len(cs[n].key) + 1
			n++
		}
		keys := make([]string, n)
		var fds []int
		for i, c := range cs[:n] {
			keys[i] = c.key
			if c.op == holder.OpPut {
				fds = append(fds, c.fd)
			}
		}
		if err := p.ask(cs[0].op, keys, fds); err != nil {
			return err
		}
		cs = cs[n:]
	}
	return nil
}

// connect reaches the holder, starting one if none answers. The caller
// holds hmu, or is Open.
func (p *Pipes) connect() error {
	c, err := p.dial()
	if err != nil && p.cfg.StartHolder != nil {
		if err = p.cfg.StartHolder(); err != nil {
			return fmt.Errorf("start the log holder: %w", err)
		}
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			if c, err = p.dial(); err == nil || time.Now().After(deadline) {
				break
			}
		}
	}
	if err != nil {
		return fmt.Errorf("log holder %s: %w", p.cfg.Socket, err)
	}
	f, err := c.File() // a copy whose hangup epoll reports
	if err != nil {
		c.Close()
		return err
	}
	fd, err := unix.Dup(int(f.Fd()))
	f.Close()
	if err != nil {
		c.Close()
		return err
	}
	unix.CloseOnExec(fd)
	if err := p.ctl(unix.EPOLL_CTL_ADD, fd, unix.EPOLLRDHUP, idHolder); err != nil {
		unix.Close(fd)
		c.Close()
		return err
	}
	p.holder, p.hangup = c, fd
	return nil
}

func (p *Pipes) dial() (*net.UnixConn, error) {
	c, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: p.cfg.Socket, Net: "unixpacket"})
	if err != nil {
		return nil, err
	}
	if err := holder.PeerAllowed(c); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func (p *Pipes) closeHolder() {
	if p.hangup >= 0 {
		_ = unix.EpollCtl(p.epfd, unix.EPOLL_CTL_DEL, p.hangup, nil)
		unix.Close(p.hangup)
		p.hangup = -1
	}
	if p.holder != nil {
		p.holder.Close()
		p.holder = nil
	}
}

// ask sends one message and waits for the holder's answer. The caller
// holds hmu.
func (p *Pipes) ask(op byte, keys []string, fds []int) error {
	if p.holder == nil {
		return errors.New("no log holder")
	}
	p.asked.Add(1)
	if err := holder.Send(p.holder, op, keys, fds); err != nil {
		return err
	}
	rop, rkeys, rfds, err := holder.Recv(p.holder, time.Now().Add(holder.IOTimeout))
	holder.CloseAll(rfds)
	switch {
	case err != nil:
		return err
	case rop == holder.OpErr && len(rkeys) > 0:
		return fmt.Errorf("log holder: %s", rkeys[0])
	case rop != holder.OpOK:
		return fmt.Errorf("log holder answered %q", rop)
	}
	return nil
}

// put hands read ends to the holder, in batches. The caller holds hmu.
func (p *Pipes) put(keys []string, fds []int) error {
	for len(keys) > 0 {
		n := min(len(keys), holder.MaxFds)
		if err := p.ask(holder.OpPut, keys[:n], fds[:n]); err != nil {
			return err
		}
		keys, fds = keys[n:], fds[n:]
	}
	return nil
}

// fetch takes back every read end the holder keeps, into held.
func (p *Pipes) fetch() error {
	if err := holder.Send(p.holder, holder.OpFetch, nil, nil); err != nil {
		return err
	}
	for {
		op, keys, fds, err := holder.Recv(p.holder, time.Now().Add(holder.IOTimeout))
		if err != nil {
			return err
		}
		switch op {
		case holder.OpFds:
			for i, k := range keys {
				unix.CloseOnExec(fds[i])
				if old, ok := p.held[k]; ok {
					unix.Close(old)
				}
				p.held[k] = fds[i]
			}
		case holder.OpEnd:
			return nil
		default:
			holder.CloseAll(fds)
			return fmt.Errorf("log holder answered %q to a fetch", op)
		}
	}
}

// reput hands the holder every read end being read, and extra: for a
// holder that was started anew. The caller holds hmu.
func (p *Pipes) reput(extraKeys []string, extraFds []int) error {
	p.mu.Lock()
	keys, fds := append([]string(nil), extraKeys...), append([]int(nil), extraFds...)
	for _, pp := range p.pipes {
		keys = append(keys, pp.key)
		fds = append(fds, pp.fd)
	}
	for k, fd := range p.held { // fetched, not adopted yet
		keys = append(keys, k)
		fds = append(fds, fd)
	}
	p.mu.Unlock()
	return p.put(keys, fds)
}

// holderGone starts a new holder and hands it every read end: the old
// one was killed, and until then a daemon killed too would leave every
// writer without a reader.
func (p *Pipes) holderGone() {
	p.hmu.Lock()
	defer p.hmu.Unlock()
	p.closeHolder()
	p.mu.Lock()
	closing := p.closing
	p.mu.Unlock()
	if closing {
		return
	}
	err := p.connect()
	if err == nil {
		err = p.reput(nil, nil)
	}
	if err != nil {
		p.log.Error("the log holder is gone and no new one holds the pipes: a daemon restart now would cost the workloads their output", zap.Error(err))
		return
	}
	p.log.Warn("the log holder was gone: a new one holds every pipe")
}

// HolderPID is the process of the holder this daemon speaks to, as the
// kernel gave its credentials when the connection was made: for the
// daemon to place it (in a delegated cgroup that the holder keeps alive).
func (p *Pipes) HolderPID() (int, error) {
	p.hmu.Lock()
	defer p.hmu.Unlock()
	if p.holder == nil {
		return 0, errors.New("no log holder")
	}
	rc, err := p.holder.SyscallConn()
	if err != nil {
		return 0, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := rc.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return 0, err
	}
	if cerr != nil {
		return 0, cerr
	}
	return int(cred.Pid), nil
}
