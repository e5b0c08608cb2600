package native

import (
	"errors"
	"fmt"
	"sync"

	"golang.org/x/sys/unix"
)

// exits waits for the ends of every run of the process through one epoll
// instance and one goroutine, which runs while there are runs to watch. A
// pidfd becomes readable when its process ends; a goroutine of each run
// parked on it (Go's poller) would cost a stack and a poller entry per
// workload for as long as it runs: 3,000 goroutines doing nothing for
// 3,000 workloads.
var exits = &exitWatcher{runs: map[uint64]*process{}}

type exitWatcher struct {
	// once opens epfd and wake, or sets err, before any watch reads them;
	// they never change after.
	once       sync.Once
	epfd, wake int // wake: an eventfd that makes the loop look again
	err        error

	// mu guards next, runs and running (and so each run's exitID); no
	// run's end is called while it is held (each on a goroutine of its
	// own), and nothing else is taken under it.
	mu      sync.Mutex
	next    uint64              // the last registration's id; 0 is wake's
	runs    map[uint64]*process // registered, their end not yet seen
	running bool                // the loop runs
}

// watch calls p.ended, on a goroutine of its own, once p's pidfd is
// readable, unless forget comes first.
func (e *exitWatcher) watch(p *process, pidfd int) error {
	e.once.Do(e.open)
	if e.err != nil {
		return e.err
	}
	e.mu.Lock()
	e.next++
	id := e.next
	e.runs[id] = p
	p.exitID = id
	if !e.running {
		e.running = true
		go e.loop()
	}
	e.mu.Unlock()
	// One event a registration: the end is seen once.
	if err := e.ctl(unix.EPOLL_CTL_ADD, pidfd, unix.EPOLLIN|unix.EPOLLONESHOT, id); err != nil {
		e.forget(p, -1)
		return fmt.Errorf("watch pidfd: %w", err)
	}
	return nil
}

func (e *exitWatcher) open() {
	if e.epfd, e.err = unix.EpollCreate1(unix.EPOLL_CLOEXEC); e.err != nil {
		e.err = fmt.Errorf("epoll for the runs' ends: %w", e.err)
		return
	}
	if e.wake, e.err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); e.err != nil {
		e.err = fmt.Errorf("eventfd for the runs' ends: %w", e.err)
		return
	}
	if e.err = e.ctl(unix.EPOLL_CTL_ADD, e.wake, unix.EPOLLIN, 0); e.err != nil {
		e.err = fmt.Errorf("epoll for the runs' ends: %w", e.err)
	}
}

// ctl registers fd (or changes its registration) with events and id.
func (e *exitWatcher) ctl(op, fd int, events uint32, id uint64) error {
	ev := unix.EpollEvent{Events: events, Fd: int32(uint32(id)), Pad: int32(uint32(id >> 32))}
	return unix.EpollCtl(e.epfd, op, fd, &ev)
}

// forget stops watching p, whose pidfd is still open (-1: never
// registered). It reports whether it came first: false means p's end was
// seen and p.ended runs, or ran.
func (e *exitWatcher) forget(p *process, pidfd int) bool {
	e.mu.Lock()
	_, ok := e.runs[p.exitID]
	delete(e.runs, p.exitID)
	idle := len(e.runs) == 0 && e.running
	e.mu.Unlock()
	if ok && pidfd >= 0 {
		_ = unix.EpollCtl(e.epfd, unix.EPOLL_CTL_DEL, pidfd, nil)
	}
	if idle {
		one := [8]byte{1} // any counter but 0 wakes the loop
		_, _ = unix.Write(e.wake, one[:])
	}
	return ok
}

// loop hands each run's end to the run, until no run is left to watch.
func (e *exitWatcher) loop() {
	events := make([]unix.EpollEvent, 64)
	for {
		n, err := unix.EpollWait(e.epfd, events, -1)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			// Not a state epoll_wait returns for a valid instance; the
			// runs' ends would then be seen by nothing, so say so loudly.
			panic(fmt.Sprintf("native: epoll_wait for the runs' ends: %v", err))
		}
		e.mu.Lock()
		for _, ev := range events[:n] {
			id := uint64(uint32(ev.Fd)) | uint64(uint32(ev.Pad))<<32
			if id == 0 {
				var b [8]byte
				_, _ = unix.Read(e.wake, b[:])
				continue
			}
			if p, ok := e.runs[id]; ok {
				delete(e.runs, id)
				go p.ended()
			}
		}
		if len(e.runs) == 0 {
			e.running = false
			e.mu.Unlock()
			return
		}
		e.mu.Unlock()
	}
}
