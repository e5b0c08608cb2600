package driver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/spec"
)

// Runtimes are the drivers of one daemon, by kind: what is asked of the
// runtimes as a whole (which kinds can run now, named volumes, the sweep
// of what an earlier daemon's workloads left) is answered here, so that
// no caller knows which runtime keeps what.
type Runtimes map[spec.Kind]Driver

// NewRuntimes is ds by kind; a later driver of a kind replaces an earlier.
func NewRuntimes(ds []Driver) Runtimes {
	r := make(Runtimes, len(ds))
	for _, d := range ds {
		r[d.Kind()] = d
	}
	return r
}

// Available says whether workloads of kind k can start now: an error
// wrapping errdefs.ErrRuntimeUnavailable when there is no runtime of k,
// or when it does not answer (Prober).
func (r Runtimes) Available(ctx context.Context, k spec.Kind) error {
	d := r[k]
	if d == nil {
		return fmt.Errorf("%w: this daemon has no %s runtime", errdefs.ErrRuntimeUnavailable, k)
	}
	if p, ok := d.(Prober); ok {
		return p.Available(ctx)
	}
	return nil
}

// Availability says, of every kind of spec.Kinds by name, whether its
// workloads can start now (Available), as the daemon's status shows it.
func (r Runtimes) Availability(ctx context.Context) map[string]bool {
	out := make(map[string]bool, len(spec.Kinds))
	for _, k := range spec.Kinds {
		out[string(k)] = r.Available(ctx, k) == nil
	}
	return out
}

// Recover asks the runtime of st (st.Driver) for the run an earlier
// daemon recorded: the run when it is alive; nil, nil when it is gone (it
// ended while no daemon watched) or this daemon has no such runtime to
// ask; an error when its runtime cannot tell (it does not answer).
func (r Runtimes) Recover(ctx context.Context, st State) (Process, error) {
	d := r[st.Driver]
	if d == nil {
		return nil, nil
	}
	p, err := d.Recover(ctx, st)
	if errors.Is(err, errdefs.ErrNotFound) {
		return nil, nil
	}
	return p, err
}

// Capabilities are kind k's runtime's; for a kind without a runtime, only
// its runtime context, which the kind names.
func (r Runtimes) Capabilities(k spec.Kind) Capabilities {
	if d := r[k]; d != nil {
		return d.Capabilities()
	}
	return Capabilities{RuntimeContext: string(k)}
}

// Forget has kind k's runtime release what it kept for workload beyond
// its runs (Forgetter); a runtime that keeps nothing has nothing to do.
func (r Runtimes) Forget(ctx context.Context, k spec.Kind, workload string) error {
	if f, ok := r[k].(Forgetter); ok {
		return f.Forget(ctx, workload)
	}
	return nil
}

// Volumes names project's named volumes, in every runtime that keeps
// volumes beyond the runs that mount them (VolumeRemover).
func (r Runtimes) Volumes(project string) ([]string, error) {
	var names []string
	var errs []error
	for _, vr := range r.volumeRemovers() {
		n, err := vr.Volumes(project)
		names, errs = append(names, n...), append(errs, err)
	}
	return names, errors.Join(errs...)
}

// RemoveVolumes removes project's named volumes from every runtime that
// keeps them, and names those it removed; a runtime keeps one a run still
// mounts.
func (r Runtimes) RemoveVolumes(ctx context.Context, project string) ([]string, error) {
	var names []string
	var errs []error
	for _, vr := range r.volumeRemovers() {
		n, err := vr.RemoveVolumes(ctx, project)
		names, errs = append(names, n...), append(errs, err)
	}
	return names, errors.Join(errs...)
}

// volumeRemovers are the runtimes that keep volumes, in spec.Kinds' order.
func (r Runtimes) volumeRemovers() []VolumeRemover {
	var out []VolumeRemover
	for _, k := range spec.Kinds {
		if vr, ok := r[k].(VolumeRemover); ok {
			out = append(out, vr)
		}
	}
	return out
}

// Sweep has each runtime that keeps state per workload (Sweeper) remove
// what belongs to no name in keep, before it returns. A runtime that does
// not answer is swept again after retryIn(n) for its retry n (1, 2, …),
// keeping the names later gives by then, until it answers or ctx ends.
// report hears of every attempt of a runtime whose first failed, by
// number (the first is 1), with its error (nil: swept). The returned
// channel is closed once no sweep is left to retry.
func (r Runtimes) Sweep(ctx context.Context, keep map[string]bool, later func() map[string]bool, retryIn func(n int) time.Duration, report func(k spec.Kind, attempt int, err error)) <-chan struct{} {
	done := make(chan struct{})
	pending := 0
	finished := make(chan struct{}, len(r))
	for k, d := range r {
		sw, ok := d.(Sweeper)
		if !ok {
			continue
		}
		if err := sw.Sweep(ctx, keep); err != nil {
			report(k, 1, err)
			pending++
			go func() {
				defer func() { finished <- struct{}{} }()
				sweepUntilDone(ctx, k, sw, later, retryIn, report)
			}()
		}
	}
	go func() {
		defer close(done)
		for range pending {
			<-finished
		}
	}()
	return done
}

// sweepUntilDone retries sw's sweep until it succeeds or ctx ends.
func sweepUntilDone(ctx context.Context, k spec.Kind, sw Sweeper, keep func() map[string]bool, retryIn func(int) time.Duration, report func(spec.Kind, int, error)) {
	for n := 1; ; n++ {
		t := time.NewTimer(retryIn(n))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		err := sw.Sweep(ctx, keep())
		report(k, n+1, err)
		if err == nil {
			return
		}
	}
}
