// Package external is the runtime of kind external: it runs nothing. A
// workload of that kind stands for a service outside the host (a managed
// database, a SaaS API) whose endpoints' addresses its spec gives; its
// "run" is the declaration being in force, from its start until it is
// stopped, and it survives a daemon's restart as a run is adopted.
package external

import (
	"context"
	"sync"
	"syscall"
	"time"

	"github.com/flyd-dev/flyd/driver"
	"github.com/flyd-dev/flyd/spec"
)

// Driver runs nothing.
type Driver struct{}

var _ driver.Driver = Driver{}

func (Driver) Kind() spec.Kind { return spec.KindExternal }

// Capabilities: codefly's runtime context of a service it does not run
// is its own, "external".
func (Driver) Capabilities() driver.Capabilities {
	return driver.Capabilities{RuntimeContext: string(spec.KindExternal)}
}

func (Driver) Start(ctx context.Context, t *driver.Task) (driver.Process, error) {
	return newProcess(driver.State{Driver: spec.KindExternal, CarrierDir: t.CarrierDir, StartedAt: time.Now()}), nil
}

// Recover takes up a run an earlier daemon recorded: there is nothing to
// find, so it is as it was.
func (Driver) Recover(ctx context.Context, s driver.State) (driver.Process, error) {
	return newProcess(s), nil
}

// process is a run of nothing: it ends when it is told to.
type process struct {
	state driver.State
	once  sync.Once
	done  chan struct{}
	exit  driver.Exit
}

func newProcess(s driver.State) *process { return &process{state: s, done: make(chan struct{})} }

func (p *process) State() driver.State                 { return p.state }
func (p *process) Done() <-chan struct{}               { return p.done }
func (p *process) Exit() driver.Exit                   { <-p.done; return p.exit }
func (p *process) Release()                            {}
func (p *process) Kill() error                         { return p.Signal(syscall.SIGKILL) }
func (p *process) SignalMain(sig syscall.Signal) error { return p.Signal(sig) }

// Signal ends the run on a signal that ends a process by default, as a
// stop's; any other (a reload's HUP, say) has nothing to reach.
func (p *process) Signal(sig syscall.Signal) error {
	switch sig {
	case syscall.SIGTERM, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGKILL:
		p.once.Do(func() {
			// Ended as asked: a clean end, whatever the signal.
			p.exit = driver.Exit{Code: 0, At: time.Now()}
			close(p.done)
		})
	}
	return nil
}
