package containerd

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/containerd/containerd/v2/pkg/cio"

	"github.com/flyd-dev/flyd/driver"
)

// execs numbers the commands run inside containers, for their exec ids.
var execs atomic.Uint64

// Exec runs argv inside the container, as `docker exec` does: in its
// namespaces, root and cgroup, as its process's user, with its
// environment and working directory; argv[0] is found in the image. Its
// output goes to out; when ctx ends it is killed, and its exit says so.
func (p *process) Exec(ctx context.Context, argv []string, out io.Writer) (driver.Exit, error) {
	select {
	case <-p.done:
		return driver.Exit{}, fmt.Errorf("container %s has ended", p.ctr.ID())
	default:
	}
	cctx := p.d.ctx(context.WithoutCancel(ctx))
	sp, err := p.ctr.Spec(cctx)
	if err != nil {
		return driver.Exit{}, err
	}
	if sp.Process == nil {
		return driver.Exit{}, fmt.Errorf("container %s has no process to run a command as", p.ctr.ID())
	}
	ps := *sp.Process
	ps.Args, ps.Terminal, ps.ConsoleSize = argv, false, nil
	lw := &lockedWriter{w: out}
	id := "flyd-exec-" + strconv.FormatUint(execs.Add(1), 10)
	proc, err := p.task.Exec(cctx, id, &ps, cio.NewCreator(cio.WithStreams(nil, lw, lw)))
	if err != nil {
		return driver.Exit{}, err
	}
	defer func() {
		// Its fifos and its record in the shim go with it.
		dctx, cancel := context.WithTimeout(cctx, 10*time.Second)
		defer cancel()
		_, _ = proc.Delete(dctx)
	}()
	statusC, err := proc.Wait(cctx)
	if err != nil {
		return driver.Exit{}, err
	}
	if err := proc.Start(cctx); err != nil {
		return driver.Exit{}, err
	}
	select {
	case st := <-statusC:
		code, _, err := st.Result()
		if pio := proc.IO(); pio != nil {
			pio.Wait() // the output copied whole
		}
		return exitOf(code, err)
	case <-ctx.Done():
		_ = proc.Kill(cctx, syscall.SIGKILL)
		select {
		case <-statusC:
		case <-time.After(10 * time.Second):
		}
		return driver.Exit{Signal: "SIGKILL", Reason: "killed: no result in time"}, ctx.Err()
	}
}

// exitOf is an exec's exit as the runtime tells it: a code, or 128+N for
// a signal, as a shell reports it.
func exitOf(code uint32, err error) (driver.Exit, error) {
	if err != nil {
		return driver.Exit{}, err
	}
	e := driver.Exit{Code: int(code), At: time.Now()}
	if code > 128 && code < 128+65 {
		e.Signal = syscall.Signal(code - 128).String()
	}
	return e, nil
}

// lockedWriter lets the command's stdout and stderr, copied on goroutines
// of their own, write to one writer.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

var _ driver.Execer = (*process)(nil)
