package registrar

import (
	"container/heap"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/flyd-dev/flyd/registryclient"
)

// maxSlack bounds how early the scheduler takes work that falls due soon
// after what woke it: up to a tenth of an entry's heartbeat interval
// (lease/30), at most this. Heartbeats spread by their jitter are thus
// sent in small bursts instead of one wake-up each: with 1,000 instances
// on the default 30 s lease that cut the registrar's and the embedded
// registry's CPU to a third, as each wake-up costs more than the request.
const maxSlack = 100 * time.Millisecond

// job is one request handed to a worker: a copy of what it needs, taken
// under the lock, so the worker reads nothing shared while it calls out.
type job struct {
	e      *entry // only touched again under the lock, in finish
	id     string
	op     op
	inst   registryclient.Instance // for opRegister
	gen    uint64                  // of inst
	ctx    context.Context
	cancel context.CancelFunc
	// more: further heartbeats or registers sent with this one in one
	// batch request, when the registry takes them (BatchRegistry,
	// BatchRegisterer).
	more []*entry
}

// Run schedules until ctx is done, then stops promptly: requests in flight
// are cancelled and nothing is deregistered, so that a daemon restart does
// not flap the registry (the next daemon re-registers the same ids). Run
// waits for a Flush that is scheduling to finish.
func (r *Registrar) Run(ctx context.Context) {
	select {
	case r.engine <- struct{}{}:
	case <-ctx.Done():
		return
	}
	defer func() { <-r.engine }()
	r.schedule(ctx, false)
}

// Flush ends every owner's desired set and deregisters every instance the
// registry may still hold, retrying failures with backoff until ctx is
// done. It is for a daemon that stops its workloads on exit; it uses the
// running scheduler if Run is running, or schedules by itself otherwise.
// A Set during Flush is honoured, and may keep Flush waiting.
func (r *Registrar) Flush(ctx context.Context) error {
	now := time.Now()
	r.mu.Lock()
	clear(r.owners)
	for _, e := range r.entries {
		e.desired = false
		if e.inflight == opNone && !e.held {
			r.drop(e)
			continue
		}
		// Backoff or not, this is the last chance: try now.
		r.queue.at(e, now)
	}
	if len(r.entries) == 0 {
		r.mu.Unlock()
		return nil
	}
	if r.drained == nil {
		r.drained = make(chan struct{})
	}
	drained := r.drained
	r.mu.Unlock()
	r.poke()

	select {
	case r.engine <- struct{}{}:
		r.schedule(ctx, true)
		<-r.engine
	case <-drained:
	case <-ctx.Done():
	}
	r.mu.Lock()
	left := len(r.entries)
	r.mu.Unlock()
	if left > 0 {
		return fmt.Errorf("registrar: flush left %d instances possibly registered: %w", left, context.Cause(ctx))
	}
	return nil
}

// schedule is the one scheduler goroutine: it hands due entries to a fixed
// pool of workers, never more than there are idle workers, and sleeps until
// the next due time, a Set, or a worker coming back. With untilEmpty it
// returns once nothing is left to do (Flush).
func (r *Registrar) schedule(ctx context.Context, untilEmpty bool) {
	ctx, stop := context.WithCancel(ctx)
	// At most workers jobs are ever outstanding, so neither channel blocks
	// its sender.
	jobs := make(chan job, r.workers)
	done := make(chan struct{}, r.workers)
	var wg sync.WaitGroup
	for range r.workers {
		wg.Go(func() { r.work(ctx, jobs, done) })
	}
	defer func() {
		stop() // cancels every request in flight
		close(jobs)
		wg.Wait()
	}()

	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	idle := r.workers
	for {
		wait, empty := r.dispatch(ctx, jobs, &idle)
		if untilEmpty && empty && idle == r.workers {
			return
		}
		if wait >= 0 {
			timer.Reset(wait)
		} else {
			timer.Stop()
		}
		select {
		case <-ctx.Done():
			return
		case <-r.notify:
		case <-timer.C:
		case <-done:
			idle++
		}
	}
}

// dispatch sends every due entry it has a worker for. It returns how long
// to sleep (-1: until something else happens) and whether no entry is
// left. The lock is held, but sending cannot block (see schedule).
func (r *Registrar) dispatch(ctx context.Context, jobs chan<- job, idle *int) (time.Duration, bool) {
	now := time.Now()
	beats, regs := r.batches()
	r.mu.Lock()
	defer r.mu.Unlock()
	for *idle > 0 && len(r.queue) > 0 && !r.queue[0].next.After(now.Add(r.queue[0].slack())) {
		e := heap.Pop(&r.queue).(*entry)
		o := e.due(now)
		if o == opNone {
			r.drop(e)
			continue
		}
		jctx, cancel := context.WithTimeout(ctx, r.timeout)
		e.inflight, e.cancel = o, cancel
		j := job{e: e, id: e.id, op: o, gen: e.gen, ctx: jctx, cancel: cancel}
		if o == opRegister {
			j.inst = e.want
		}
		if (o == opHeartbeat && beats) || (o == opRegister && regs) {
			j.more = r.batchWith(now, o, cancel)
		}
		jobs <- j
		*idle--
	}
	wait := time.Duration(-1)
	if *idle > 0 && len(r.queue) > 0 {
		wait = max(r.queue[0].next.Sub(now), 0)
	}
	return wait, len(r.entries) == 0
}

// batches says whether heartbeats and registers go in batches now: when
// the registry takes them, which a Negotiator knows only once the
// registry announced them.
func (r *Registrar) batches() (beats, regs bool) {
	beats, regs = r.batch != nil, r.batchReg != nil
	if r.nego != nil {
		e := r.nego.Extensions()
		beats, regs = beats && e.BatchHeartbeat, regs && e.BatchRegister
	}
	return beats, regs
}

// batchWith takes the requests of op due soon into one batch, up to a
// batch: heartbeats due within a tenth of their heartbeat period
// (lease/30), sent a little early, and registers due now (within their
// slack, as dispatch takes them). They cost the registry one request
// instead of one each. Entries due meanwhile that need another request
// are left queued for the next worker. Called with r.mu held.
func (r *Registrar) batchWith(now time.Time, o op, cancel context.CancelFunc) []*entry {
	var more, other []*entry
	for len(more) < registryclient.MaxBatch-1 && len(other) < registryclient.MaxBatch && len(r.queue) > 0 {
		e := r.queue[0]
		window := e.slack()
		if o == opHeartbeat {
			window = e.lease / 30
		}
		if e.next.After(now.Add(window)) {
			break
		}
		heap.Pop(&r.queue)
		if e.due(now) != o {
			other = append(other, e)
			continue
		}
		e.inflight, e.cancel = o, cancel
		more = append(more, e)
	}
	for _, e := range other {
		r.queue.at(e, e.next)
	}
	return more
}

// work runs requests until jobs is closed. Jobs left over after the
// engine stopped are not sent: they are handed back as aborted.
func (r *Registrar) work(ctx context.Context, jobs <-chan job, done chan<- struct{}) {
	for j := range jobs {
		if len(j.more) > 0 {
			r.workBatch(ctx, j)
			done <- struct{}{}
			continue
		}
		var err error
		if err = ctx.Err(); err == nil {
			err = r.call(j)
		}
		r.finish(ctx, j, err) // before cancel: finish tells our cancel from others'
		j.cancel()
		done <- struct{}{}
	}
}

// workBatch sends the heartbeats or registers of j and j.more in batch
// requests and finishes each entry with its own answer.
func (r *Registrar) workBatch(ctx context.Context, j job) {
	es := append([]*entry{j.e}, j.more...)
	ids := make([]string, len(es))
	gens := make([]uint64, len(es))
	var ins []registryclient.Instance
	r.mu.Lock()
	for i, e := range es {
		ids[i], gens[i] = e.id, e.gen
		if j.op == opRegister {
			ins = append(ins, e.want) // with its gen: want is replaced on change, never mutated
		}
	}
	r.mu.Unlock()
	errs := make([]error, len(es))
	switch {
	case ctx.Err() != nil:
		for i := range errs {
			errs[i] = ctx.Err()
		}
	case j.op == opRegister:
		errs = r.batchReg.RegisterMany(j.ctx, ins)
	default:
		errs = r.batch.HeartbeatMany(j.ctx, ids)
	}
	for i, e := range es {
		fj := job{e: e, id: ids[i], op: j.op, gen: gens[i], ctx: j.ctx, cancel: j.cancel}
		if j.op == opRegister {
			fj.inst = ins[i]
		}
		r.finish(ctx, fj, errs[i])
	}
	j.cancel()
}

func (r *Registrar) call(j job) error {
	switch j.op {
	case opRegister:
		// The id is always ours, so the one the registry echoes is too.
		_, _, err := r.reg.Register(j.ctx, j.inst)
		return err
	case opHeartbeat:
		return r.reg.Heartbeat(j.ctx, j.id)
	default:
		return r.reg.Deregister(j.ctx, j.id)
	}
}
