package containerd

import (
	"context"
	"sync"
	"syscall"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	cerrdefs "github.com/containerd/errdefs"
	"golang.org/x/sys/unix"

	"github.com/flyd-dev/flyd/driver"
)

// process is one containerd task being watched.
type process struct {
	d    *Driver
	ctr  containerd.Container
	task containerd.Task
	st   driver.State

	wctx     context.Context
	wcancel  context.CancelFunc
	done     chan struct{}
	watching chan struct{}
	released chan struct{}
	relOnce  sync.Once
	exit     driver.Exit
}

func (d *Driver) watch(ctr containerd.Container, task containerd.Task, exitCh <-chan containerd.ExitStatus,
	wctx context.Context, wcancel context.CancelFunc, st driver.State) *process {
	p := &process{
		d: d, ctr: ctr, task: task, st: st,
		wctx: wctx, wcancel: wcancel,
		done:     make(chan struct{}),
		watching: make(chan struct{}),
		released: make(chan struct{}),
	}
	go p.wait(exitCh)
	return p
}

func (p *process) wait(exitCh <-chan containerd.ExitStatus) {
	defer close(p.watching)
	for {
		var es containerd.ExitStatus
		select {
		case <-p.released:
			return
		case es = <-exitCh:
		}
		select {
		case <-p.released:
			return
		default:
		}
		if err := es.Error(); err != nil {
			// The daemon restarted or the connection broke: wait again,
			// unless the task is gone for good.
			if cerrdefs.IsNotFound(err) {
				p.exit = driver.Exit{At: time.Now(), Unknown: true}
				break
			}
			select {
			case <-p.released:
				return
			case <-time.After(500 * time.Millisecond):
			}
			ch, err := p.task.Wait(p.wctx)
			if err != nil {
				p.exit = driver.Exit{At: time.Now(), Unknown: true}
				break
			}
			exitCh = ch
			continue
		}
		p.exit = toExit(es)
		break
	}
	p.wcancel()
	if p.exit.Unknown {
		_ = p.d.remove(context.Background(), p.ctr, p.task)
	} else {
		_ = p.d.removeEnded(context.Background(), p.ctr, p.task)
	}
	close(p.done)
}

func toExit(es containerd.ExitStatus) driver.Exit {
	e := driver.Exit{At: es.ExitTime(), Code: int(es.ExitCode())}
	if e.At.IsZero() {
		e.At = time.Now()
	}
	if es.ExitCode() == containerd.UnknownExitStatus {
		e.Code, e.Unknown = 0, true
		return e
	}
	// runc reports death by a signal as 128+signal.
	if e.Code > 128 && e.Code < 128+65 {
		if name := unix.SignalName(syscall.Signal(e.Code - 128)); name != "" {
			e.Signal = name
		}
	}
	return e
}

func (p *process) State() driver.State   { return p.st }
func (p *process) Done() <-chan struct{} { return p.done }
func (p *process) Exit() driver.Exit     { return p.exit }

// Signal delivers sig to every process of the container.
func (p *process) Signal(sig syscall.Signal) error { return p.kill(sig, containerd.WithKillAll) }

// SignalMain delivers sig to the container's init process alone.
func (p *process) SignalMain(sig syscall.Signal) error { return p.kill(sig) }

func (p *process) kill(sig syscall.Signal, opts ...containerd.KillOpts) error {
	select {
	case <-p.done:
		return nil
	default:
	}
	ctx, cancel := context.WithTimeout(p.wctxOrBackground(), 10*time.Second)
	defer cancel()
	err := p.task.Kill(ctx, sig, opts...)
	if err != nil && (cerrdefs.IsNotFound(err) || isFinished(err)) {
		return nil
	}
	return err
}

// Kill sends SIGKILL to every process of the container.
func (p *process) Kill() error { return p.Signal(syscall.SIGKILL) }

// Release stops watching and leaves the container running.
func (p *process) Release() {
	p.relOnce.Do(func() {
		close(p.released)
		<-p.watching
		p.wcancel()
	})
}

func (p *process) wctxOrBackground() context.Context {
	return p.d.ctx(context.Background())
}

func isFinished(err error) bool {
	return err != nil && (cerrdefs.IsFailedPrecondition(err) || cerrdefs.IsNotFound(err))
}
