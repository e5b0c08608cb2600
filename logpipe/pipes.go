package logpipe

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/flyd-dev/flyd/logpipe/holder"
)

// Size is the buffer a pipe is given (F_SETPIPE_SZ, bounded by
// fs.pipe-max-size) once a read finds it half full, its writer writing
// faster than a read a wake-up: what a workload then writes without
// waiting for the daemon, and what it can leave in the kernel's memory
// while no daemon reads. A pipe starts at the kernel's default (64 KiB):
// its ring of page slots takes 1.5 KiB of the kernel's memory, where a
// ring of 1 MiB takes 16.5 KiB, 165 MB for 10,000 quiet workloads.
const Size = 1 << 20

// growAt is how much one read must take for its pipe to grow to Size.
const growAt = 32 << 10

// chunk is the most one read of a pipe takes: the bound at which a line
// without an end is cut, each piece dated by its own read.
const chunk = Size

// Sink is where a pipe's bytes go: logfile.Log.
type Sink interface {
	// Take moves up to max bytes waiting in fd; 0 and nil when there are
	// none, io.EOF when the writers are gone and the pipe drained.
	Take(fd int, max int) (int, error)
}

// ErrDiscard, from a Sink, says its pipe's bytes have nowhere to go any
// more (the workload and its log were removed): the pipe is closed.
var ErrDiscard = errors.New("log removed")

// Config is what Pipes needs.
type Config struct {
	// Socket is the holder's, in the run dir.
	Socket string
	// StartHolder starts a holder serving Socket, which it may have to
	// remove first; nil starts none (a test serving one itself).
	StartHolder func() error
	Logger      *zap.Logger
}

// Pipes reads every run's pipe into its sink from one goroutine, and
// keeps a copy of each read end with the holder.
//
// Its locks are taken in the order hmu → qmu and hmu → mu; qmu and mu are
// never held together, and neither is held while hmu is taken. A paused
// pipe's timer (time.AfterFunc) takes mu alone. epfd and wake are set at
// Open and closed after the reading loop ended.
type Pipes struct {
	cfg  Config
	log  *zap.Logger
	epfd int
	wake int // eventfd: Close, and pipes paused and resumed

	// hmu has one exchange with the holder at a time, and guards holder
	// and hangup (a copy of holder's descriptor, in epfd: its end is seen
	// there). Open sets them before any other goroutine runs.
	hmu    sync.Mutex
	holder *net.UnixConn
	hangup int

	// qmu guards queued, the changes for the holder's next exchange
	// (tell); nothing else is taken while it is held.
	qmu    sync.Mutex
	queued *round
	// flushing says an exchange of dropLater's is on its way: set by
	// whoever starts one, cleared under hmu by the exchange itself.
	flushing atomic.Bool
	// asked counts the messages the holder was asked to answer (under
	// hmu), read by tests.
	asked atomic.Uint64

	// mu guards next, pipes, groups, held and closing, and each pipe's
	// paused; it is held while a pipe is added to epfd or taken back in,
	// never while a pipe is read or the holder spoken to.
	mu      sync.Mutex
	next    uint64
	pipes   map[uint64]*pipe
	groups  map[string]map[uint64]*pipe // the pipes by their key's group (Drain)
	held    map[string]int              // read ends fetched from the holder, not adopted yet
	closing bool

	// busy is when the read in progress began (unix nanoseconds), 0 for
	// none: stored by the reading loop, loaded by the watchdog.
	busy atomic.Int64
	done chan struct{}
	stop chan struct{}
}

// A pipe's key, fd, sink and ended are set before it is added and never
// changed; paused is written under Pipes.mu, by the reading loop (pause)
// and by the timer that resumes the pipe, and read by the loop just after
// it let mu go (read): the timer clears it before it puts the pipe back in
// epfd, so the loop sees it cleared. failing and grown are the reading
// loop's alone.
type pipe struct {
	key     string
	fd      int
	sink    Sink
	ended   chan struct{} // closed once its bytes are all in the log
	paused  bool
	failing bool // its log could not be written, and has not been since
	grown   bool
}

// Reserved epoll ids.
const (
	idWake   = 0
	idHolder = 1
)

// Open connects to the holder at cfg.Socket, or starts one, takes back
// every read end it holds (see Adopt) and starts reading.
func Open(cfg Config) (*Pipes, error) {
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	p := &Pipes{cfg: cfg, log: cfg.Logger, hangup: -1, next: idHolder, pipes: map[uint64]*pipe{}, groups: map[string]map[uint64]*pipe{},
		held: map[string]int{}, done: make(chan struct{}), stop: make(chan struct{})}
	var err error
	if p.epfd, err = unix.EpollCreate1(unix.EPOLL_CLOEXEC); err != nil {
		return nil, fmt.Errorf("epoll for the log pipes: %w", err)
	}
	if p.wake, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err != nil {
		unix.Close(p.epfd)
		return nil, fmt.Errorf("eventfd for the log pipes: %w", err)
	}
	if err := p.ctl(unix.EPOLL_CTL_ADD, p.wake, unix.EPOLLIN, idWake); err != nil {
		p.closeFds()
		return nil, err
	}
	// A holder on its way out (its last daemon just left, with nothing
	// held) may still answer a dial: then again, with a new one.
	for try := 0; try < 3; try++ {
		if try > 0 {
			p.closeHolder()
			time.Sleep(50 * time.Millisecond)
		}
		if err = p.connect(); err == nil {
			if err = p.fetch(); err == nil {
				break
			}
		}
	}
	if err != nil {
		p.closeHolder()
		p.closeFds()
		return nil, err
	}
	go p.loop()
	go p.watchdog()
	return p, nil
}

func (p *Pipes) ctl(op, fd int, events uint32, id uint64) error {
	ev := unix.EpollEvent{Events: events, Fd: int32(uint32(id)), Pad: int32(uint32(id >> 32))}
	return unix.EpollCtl(p.epfd, op, fd, &ev)
}

func (p *Pipes) closeFds() {
	unix.Close(p.wake)
	unix.Close(p.epfd)
}

// Adopt reads each read end taken back from the holder into sinkOf(its
// key), or closes it (and has the holder close its copy) where sinkOf
// gives nil. Call it once, after Open.
func (p *Pipes) Adopt(sinkOf func(key string) Sink) {
	p.mu.Lock()
	held := p.held
	p.held = nil
	p.mu.Unlock()
	var drop []string
	for key, fd := range held {
		sink := sinkOf(key)
		if sink == nil {
			unix.Close(fd)
			drop = append(drop, key)
			continue
		}
		if err := p.add(key, fd, sink); err != nil {
			p.log.Warn("cannot read a held log pipe", zap.String("pipe", key), zap.Error(err))
			unix.Close(fd)
		}
	}
	if len(drop) > 0 {
		cs := make([]change, len(drop))
		for i, k := range drop {
			cs[i] = change{op: holder.OpDrop, key: k, fd: -1}
		}
		_ = p.exchange(cs...)
	}
}

// New makes a pipe for a run: the returned write end is the run's
// stdout and stderr, to be closed by the caller once the run has it. The
// read end is with the holder before New returns, so the run's writes
// never meet a pipe without a reader, whatever becomes of the daemon.
func (p *Pipes) New(key string, sink Sink) (*os.File, error) {
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC); err != nil {
		return nil, err
	}
	r, w := fds[0], fds[1]
	if err := unix.SetNonblock(r, true); err != nil {
		unix.Close(r)
		unix.Close(w)
		return nil, err
	}
	if err := p.exchange(change{op: holder.OpPut, key: key, fd: r}); err != nil {
		unix.Close(r)
		unix.Close(w)
		return nil, fmt.Errorf("log pipe: %w", err)
	}
	if err := p.add(key, r, sink); err != nil {
		_ = p.exchange(change{op: holder.OpDrop, key: key, fd: -1})
		unix.Close(r)
		unix.Close(w)
		return nil, err
	}
	return os.NewFile(uintptr(w), "log-pipe"), nil
}

func pipeSize() int {
	b, err := os.ReadFile("/proc/sys/fs/pipe-max-size")
	if err != nil {
		return Size
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			break
		}
		n = n*10 + int(c-'0')
	}
	if n <= 0 {
		return Size
	}
	return min(Size, n)
}

func (p *Pipes) add(key string, fd int, sink Sink) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closing {
		return errors.New("log pipes closed")
	}
	p.next++
	id := p.next
	if err := p.ctl(unix.EPOLL_CTL_ADD, fd, unix.EPOLLIN, id); err != nil {
		return err
	}
	pp := &pipe{key: key, fd: fd, sink: sink, ended: make(chan struct{})}
	p.pipes[id] = pp
	g := p.groups[group(key)]
	if g == nil {
		g = map[uint64]*pipe{}
		p.groups[group(key)] = g
	}
	g[id] = pp
	return nil
}

// loop reads every pipe that has something, a read each per round, so
// that a flood of one workload delays another's lines by one read.
func (p *Pipes) loop() {
	defer close(p.done)
	events := make([]unix.EpollEvent, 128)
	for {
		n, err := unix.EpollWait(p.epfd, events, -1)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			p.log.Error("the log pipes are read no more", zap.Error(err))
			return
		}
		for _, ev := range events[:n] {
			id := uint64(uint32(ev.Fd)) | uint64(uint32(ev.Pad))<<32
			switch id {
			case idWake:
				var b [8]byte
				_, _ = unix.Read(p.wake, b[:])
				p.mu.Lock()
				closing := p.closing
				p.mu.Unlock()
				if closing {
					return
				}
			case idHolder:
				p.holderGone()
			default:
				p.read(id, ev.Events)
			}
		}
	}
}

func (p *Pipes) read(id uint64, events uint32) {
	p.mu.Lock()
	pp := p.pipes[id]
	p.mu.Unlock()
	if pp == nil || pp.paused {
		return
	}
	if events&unix.EPOLLIN == 0 && events&unix.EPOLLHUP != 0 {
		// Its writers are gone and nothing is left in it: it ends
		// without its log being opened (after a daemon's restart a log
		// is opened at its first bytes, and a stop of thousands opened
		// each one to learn that nothing came).
		p.end(id, pp)
		return
	}
	p.busy.Store(time.Now().UnixNano())
	n, err := pp.sink.Take(pp.fd, chunk)
	p.busy.Store(0)
	if n >= growAt && !pp.grown {
		// Best effort: a smaller pipe only makes its writer wait sooner.
		_, _ = unix.FcntlInt(uintptr(pp.fd), unix.F_SETPIPE_SZ, pipeSize())
		pp.grown = true
	}
	switch {
	case err == nil:
		if n > 0 && pp.failing {
			pp.failing = false
			p.log.Info("a workload's log is written again", zap.String("pipe", pp.key))
		}
	case errors.Is(err, io.EOF), errors.Is(err, ErrDiscard):
		p.end(id, pp)
	default:
		p.pause(id, pp, err)
	}
}

// end closes a pipe whose writers are gone and whose bytes are all in
// the log, or that has no log any more.
func (p *Pipes) end(id uint64, pp *pipe) {
	p.mu.Lock()
	delete(p.pipes, id)
	if g := p.groups[group(pp.key)]; g != nil {
		if delete(g, id); len(g) == 0 {
			delete(p.groups, group(pp.key))
		}
	}
	p.mu.Unlock()
	_ = unix.EpollCtl(p.epfd, unix.EPOLL_CTL_DEL, pp.fd, nil)
	unix.Close(pp.fd)
	close(pp.ended)
	p.dropLater(pp.key)
}

// group is a key's group: what comes before its last '.' (a workload's
// runs share one), or the whole key.
func group(key string) string {
	if i := strings.LastIndexByte(key, '.'); i >= 0 {
		return key[:i]
	}
	return key
}

// Drain waits, at most until timeout, until every pipe of group has ended:
// its writers gone and all they wrote in the log. A run that has ended has
// no writer left, so its last lines are then in the log before anyone is
// told it ended. It says whether they all did. It costs what the group's
// pipes are, however many others there are.
func (p *Pipes) Drain(group string, timeout time.Duration) bool {
	p.mu.Lock()
	waits := make([]chan struct{}, 0, len(p.groups[group]))
	for _, pp := range p.groups[group] {
		waits = append(waits, pp.ended)
	}
	p.mu.Unlock()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for _, w := range waits {
		select {
		case <-w:
		case <-deadline.C:
			return false
		}
	}
	return true
}

// pauseFor is how long a pipe whose log cannot be written (a full disk)
// waits before it is read again. Its writers wait meanwhile, on the full
// pipe; nothing is lost.
const pauseFor = time.Second

func (p *Pipes) pause(id uint64, pp *pipe, err error) {
	if !pp.failing {
		// Once, until it is written again: a full disk is not a line a
		// second for every workload.
		pp.failing = true
		p.log.Warn("cannot write a workload's log; its output waits in its pipe, read again every second",
			zap.String("pipe", pp.key), zap.Error(err))
	}
	p.mu.Lock()
	pp.paused = true
	p.mu.Unlock()
	_ = unix.EpollCtl(p.epfd, unix.EPOLL_CTL_DEL, pp.fd, nil)
	time.AfterFunc(pauseFor, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.closing || p.pipes[id] != pp {
			return
		}
		pp.paused = false
		if err := p.ctl(unix.EPOLL_CTL_ADD, pp.fd, unix.EPOLLIN, id); err != nil {
			p.log.Error("cannot read a log pipe again", zap.String("pipe", pp.key), zap.Error(err))
		}
	})
}

// watchdog says so when one read has taken long: the disk does not
// answer, and every workload's log waits for it.
func (p *Pipes) watchdog() {
	t := time.NewTicker(10 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
		}
		if b := p.busy.Load(); b != 0 {
			if d := time.Since(time.Unix(0, b)); d > 10*time.Second {
				p.log.Error("writing a log has taken long: every workload's output waits in its pipe", zap.Duration("for", d))
			}
		}
	}
}

// Close stops reading and closes the daemon's read ends; the holder
// keeps its copies for the next daemon.
func (p *Pipes) Close() {
	p.mu.Lock()
	if p.closing {
		p.mu.Unlock()
		return
	}
	p.closing = true
	p.mu.Unlock()
	one := [8]byte{1}
	_, _ = unix.Write(p.wake, one[:])
	<-p.done
	close(p.stop)
	p.mu.Lock()
	for id, pp := range p.pipes {
		unix.Close(pp.fd)
		delete(p.pipes, id)
	}
	clear(p.groups)
	for k, fd := range p.held {
		unix.Close(fd)
		delete(p.held, k)
	}
	p.mu.Unlock()
	p.hmu.Lock()
	p.sendQueued() // the drops of pipes that ended: the holder need not keep them
	p.closeHolder()
	p.hmu.Unlock()
	p.closeFds()
}

// Count is how many pipes are being read.
func (p *Pipes) Count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.pipes)
}
