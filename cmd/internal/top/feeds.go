package top

import (
	"bytes"
	"context"
	"slices"
	"sync"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/flyd-dev/flyd/api"
	"github.com/flyd-dev/flyd/spec"
)

// Messages the feeds send the model.
type (
	// snapshotMsg is the daemon's workloads and networks, read anew.
	snapshotMsg struct {
		workloads []api.Workload
		networks  []api.Network
	}
	statsMsg     struct{ stats *api.Stats }
	eventMsg     struct{ ev api.Event }
	logLineMsg   struct{ workload, line string }
	connectedMsg struct{}
	// goneMsg says the daemon went away; the feeds are reconnecting.
	goneMsg struct{ err error }
	// doneMsg is the outcome of an action on a workload.
	doneMsg struct {
		what string
		err  error
	}
)

// feeds are the goroutines that read the daemon for the model: the
// event stream (and a snapshot after each burst of events), usage once
// an interval, and the selected workload's log.
type feeds struct {
	ctx  context.Context
	c    *api.Client
	send func(tea.Msg)
	wg   sync.WaitGroup

	mu        sync.Mutex // guards logCancel
	logCancel context.CancelFunc
	// project, when set, is the one project shown (-p).
	project *string
}

// shows says whether the dashboard shows what is of a project.
func (f *feeds) shows(project string) bool { return f.project == nil || *f.project == project }

func newFeeds(ctx context.Context, c *api.Client, send func(tea.Msg)) *feeds {
	return &feeds{ctx: ctx, c: c, send: send}
}

func (f *feeds) wait() { f.wg.Wait() }

func (f *feeds) goFn(fn func()) {
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		fn()
	}()
}

// connect opens the event stream with the last `history` events the
// daemon keeps, retrying every second while the daemon does not answer,
// then follows it until it ends, and connects again after the last event
// it had.
func (f *feeds) connect(history uint64) {
	f.goFn(func() {
		var after uint64
		started := false
		for f.ctx.Err() == nil {
			if !started {
				st, err := f.c.Status(f.ctx)
				if err != nil {
					f.send(goneMsg{err})
					if !f.sleep(time.Second) {
						return
					}
					continue
				}
				started, after = true, historyStart(st.LastEvent, history)
			}
			ch, err := f.c.Events(f.ctx, after)
			if err != nil {
				f.send(goneMsg{err})
				if !f.sleep(time.Second) {
					return
				}
				continue
			}
			f.send(connectedMsg{})
			f.snapshot()
			burst := time.NewTimer(time.Hour)
			burst.Stop()
		stream:
			for {
				select {
				case ev, ok := <-ch:
					if !ok {
						break stream
					}
					after = ev.Seq
					if !f.shows(ev.Project) {
						continue
					}
					f.send(eventMsg{ev})
					// One snapshot per burst of events, not one per event.
					burst.Reset(50 * time.Millisecond)
				case <-burst.C:
					f.snapshot()
				case <-f.ctx.Done():
					return
				}
			}
			burst.Stop()
			if f.ctx.Err() == nil {
				f.send(goneMsg{})
			}
		}
	})
}

// historyStart is the `after` that replays the last n of the events up to
// last. The stream replays only after an event (after=0 is "from now"),
// so a daemon with no more than n events shows them from its second.
func historyStart(last, n uint64) uint64 {
	switch {
	case last == 0:
		return 0
	case last <= n:
		return 1
	}
	return last - n
}

func (f *feeds) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-f.ctx.Done():
		return false
	}
}

func (f *feeds) snapshot() {
	list := f.c.List
	if f.project != nil {
		list = func(ctx context.Context) ([]api.Workload, error) { return f.c.ListProject(ctx, *f.project) }
	}
	ws, err := list(f.ctx)
	if err != nil {
		return
	}
	ns, err := api.DocumentsOf[api.Network](f.ctx, f.c, spec.KindNetwork)
	if err != nil {
		return
	}
	ns = slices.DeleteFunc(ns, func(n api.Network) bool { return !f.shows(spec.ProjectOf(n.Name)) })
	f.send(snapshotMsg{ws, ns})
}

// stats reads one sample, nil when the daemon does not answer; the model
// asks for the next one after the sample's interval (statsTick).
func (f *feeds) stats() {
	f.goFn(func() {
		st, err := f.c.Stats(f.ctx)
		if err != nil {
			st = nil
		}
		f.send(statsMsg{st})
	})
}

// follow shows name's log from its last lines on, replacing what was
// followed before; "" follows nothing.
func (f *feeds) follow(name string, lines int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.logCancel != nil {
		f.logCancel()
		f.logCancel = nil
	}
	if name == "" {
		return
	}
	ctx, cancel := context.WithCancel(f.ctx)
	f.logCancel = cancel
	f.goFn(func() {
		var part []byte
		sink := api.LogFunc(func(r api.LogRecord) error {
			part = append(part, r.Data...)
			for {
				i := bytes.IndexByte(part, '\n')
				if i < 0 {
					break
				}
				f.send(logLineMsg{name, string(part[:i])})
				part = part[i+1:]
			}
			return nil
		})
		// Ends with the daemon; the next connect follows again.
		_ = f.c.Logs(ctx, name, api.LogQuery{Tail: lines, Follow: true}, sink)
	})
}

// act runs an action on the daemon and reports its outcome.
func (f *feeds) act(what string, do func(ctx context.Context) error) {
	f.goFn(func() {
		ctx, cancel := context.WithTimeout(f.ctx, time.Minute)
		defer cancel()
		f.send(doneMsg{what, do(ctx)})
	})
}
