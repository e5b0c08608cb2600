// Package runhook is what the steps of a workload's runs share: the run as
// they see it, the Hook each implements, and the phases a hook may take
// part in. A hook owns one concern of the runs (the network they join, the
// cgroup and its limits, the log, the project's /dev/shm, the health
// checks): what it acquires before a run starts, what it takes again of a
// live run an earlier daemon left, and what it releases once the run ended
// and once the workload is gone. A hook implements only the phases it has
// something to do in, each an interface of one method (Prestarter,
// Adopter, Poststarter, Exiter, Destroyer); a Chain runs them in order and
// releases them in reverse, and the supervisor decides when. Each concern's
// package implements its hook beside what it owns, and keeps what it must
// of a run in the run's record (Kept) under field names of its own. No
// concern lives here.
package runhook

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/flyd-dev/flyd/driver"
)

// Run is one run of a workload as its hooks see it.
type Run struct {
	// Task is what the runtime is given: Workload, Spec and CarrierDir
	// are set before the hooks run, and each fills its part (Network,
	// Cgroup and Limits, Log, Shm) in Prestart. Of an adopted run only
	// Workload and Spec are set.
	Task driver.Task
	// Driver is the runtime the run is in, for what a hook must know of
	// it (driver.FileLogs, its capabilities).
	Driver driver.Driver
	// Env is what the hooks tell the program, planned with the rest of
	// its environment after Prestart: the values of its `uses`, given to
	// the hooks, and what they add (a notify socket).
	Env map[string]string
	// Process is the run once it started, or was adopted.
	Process driver.State
	// Kept is what the hooks keep of the run in its record, for a later
	// daemon; an adopted run's is the record's.
	Kept Kept
}

// Kept is what the hooks keep of a run in its record, for the daemon that
// adopts it (what it cannot learn again from the run itself), field by
// field: each hook reads and writes fields of its own, JSON values by
// name, which the record keeps beside its own.
type Kept map[string]json.RawMessage

// Get reads field into v; false when the run keeps none (or it does not
// decode, as a record of another daemon's may not).
func (k Kept) Get(field string, v any) bool {
	b, ok := k[field]
	return ok && json.Unmarshal(b, v) == nil
}

// Set keeps v as field; false and null keep nothing, as a record leaves
// out what is not so.
func (k *Kept) Set(field string, v any) {
	b, err := json.Marshal(v)
	if err != nil || string(b) == "false" || string(b) == "null" {
		delete(*k, field)
		return
	}
	if *k == nil {
		*k = Kept{}
	}
	(*k)[field] = b
}

// Hook is one concern of a workload's runs, by its name. It takes part in
// the phases whose interfaces it implements, on the workload's loop, one
// call at a time. Every Prestart or Adopt that returned is matched by one
// Exited, unless the daemon exits and leaves the run to the next one;
// Destroy comes once the workload is removed.
type Hook interface {
	Name() string
}

// Prestarter acquires what the run needs before it starts. On an error,
// the hooks before it release theirs and the run does not start.
type Prestarter interface {
	Prestart(ctx context.Context, r *Run) error
}

// Adopter acquires again what a live run of an earlier daemon holds, as
// r.Kept says.
type Adopter interface {
	Adopt(ctx context.Context, r *Run)
}

// Poststarter is told that the run started, or was adopted, and is shown
// running: r.Process is set.
type Poststarter interface {
	Poststart(ctx context.Context, r *Run)
}

// Exiter releases what Prestart or Adopt acquired: the run ended, or never
// started.
type Exiter interface {
	Exited(ctx context.Context, r *Run)
}

// Destroyer releases what the workload held across its runs, once it is
// removed (or its quarantined record is).
type Destroyer interface {
	Destroy(ctx context.Context, workload string)
}

// Chain is hooks run as one: they acquire (Prestart, Adopt) and are told
// of the start (Poststart) in order, and release (Exited, Destroy) in
// reverse, so that each releases before what it was acquired after. When
// a Prestart fails, the hooks before it release theirs, in reverse, and
// those after it are not asked.
type Chain []Hook

// Prestart acquires hook by hook; see Chain for a failure, which names
// the hook.
func (c Chain) Prestart(ctx context.Context, r *Run) error {
	for i, h := range c {
		p, ok := h.(Prestarter)
		if !ok {
			continue
		}
		if err := p.Prestart(ctx, r); err != nil {
			c[:i].Exited(ctx, r)
			return fmt.Errorf("%s: %w", h.Name(), err)
		}
	}
	return nil
}

// Adopt has every hook acquire again what r holds, in order.
func (c Chain) Adopt(ctx context.Context, r *Run) {
	for _, h := range c {
		if a, ok := h.(Adopter); ok {
			a.Adopt(ctx, r)
		}
	}
}

// Poststart tells every hook, in order, that r is shown running.
func (c Chain) Poststart(ctx context.Context, r *Run) {
	for _, h := range c {
		if p, ok := h.(Poststarter); ok {
			p.Poststart(ctx, r)
		}
	}
}

// Exited has every hook release what r held, in reverse.
func (c Chain) Exited(ctx context.Context, r *Run) {
	for i := len(c) - 1; i >= 0; i-- {
		if e, ok := c[i].(Exiter); ok {
			e.Exited(ctx, r)
		}
	}
}

// Destroy has every hook release what workload held across its runs, in
// reverse.
func (c Chain) Destroy(ctx context.Context, workload string) {
	for i := len(c) - 1; i >= 0; i-- {
		if d, ok := c[i].(Destroyer); ok {
			d.Destroy(ctx, workload)
		}
	}
}
