// Package runhook is what the steps of a workload's runs share: the run as
// they see it and the Hook each implements. A hook owns one concern of the
// runs (the network they join, the cgroup and its limits, the log, the
// health checks): what it acquires before a run starts, what it takes
// again of a live run an earlier daemon left, and what it releases once
// the run ended and once the workload is gone. Each concern's package
// implements its hook beside what it owns; a Chain runs them in order and
// releases them in reverse, and the supervisor decides when. No concern
// lives here.
package runhook

import "github.com/flyd-dev/flyd/driver"

// Run is one run of a workload as its hooks see it.
type Run struct {
	// Task is what the runtime is given: Workload, Spec and CarrierDir
	// are set before the hooks run, and each fills its part (Network,
	// Cgroup and Limits, Log) in Prestart. Of an adopted run only
	// Workload and Spec are set.
	Task driver.Task
	// Driver is the runtime the run is in, for what a hook must know of
	// it (driver.FileLogs).
	Driver driver.Driver
	// Env is what the hooks tell the program, planned with the rest of
	// its environment after Prestart: the values of its `uses`, given to
	// the hooks, and what they add (a notify socket).
	Env map[string]string
	// Process is the run once it started, or was adopted.
	Process driver.State
	// Kept is what the run's record keeps for a later daemon; an adopted
	// run's is the record's.
	Kept
}

// Kept is what the hooks keep of a run in its record, for the daemon
// that adopts it: what it cannot learn again from the run itself.
type Kept struct {
	// Ready is a notify workload's READY=1, which it says once, or a log
	// check's line.
	Ready bool `json:"ready,omitempty"`
	// LogPipe says the run writes to a pipe the daemon reads; a record
	// without it is of a run that writes its log file itself.
	LogPipe bool `json:"log_pipe,omitempty"`
	// LogFrom is where the run's output begins in its log, for its log
	// check.
	LogFrom *int64 `json:"log_from,omitempty"`
}

// Hook is one concern of a workload's runs. Its methods are called on the
// workload's loop, one at a time. Every Prestart or Adopt that returned
// is matched by one Exited, unless the daemon exits and leaves the run to
// the next one; Destroy comes once the workload is removed.
type Hook interface {
	// Prestart acquires what the run needs before it starts. On an
	// error, the hooks before it release theirs and the run does not
	// start.
	Prestart(r *Run) error
	// Adopt acquires again what a live run of an earlier daemon holds,
	// as r.Kept says.
	Adopt(r *Run)
	// Poststart is told that the run started, or was adopted, and is
	// shown running: r.Process is set.
	Poststart(r *Run)
	// Exited releases what Prestart or Adopt acquired: the run ended, or
	// never started.
	Exited(r *Run)
	// Destroy releases what the workload held across its runs, once it
	// is removed (or its quarantined record is).
	Destroy(workload string)
}

// Chain is hooks run as one, itself a Hook: they acquire (Prestart,
// Adopt) and are told of the start (Poststart) in order, and release
// (Exited, Destroy) in reverse, so that each releases before what it was
// acquired after. When a Prestart fails, the hooks before it release
// theirs, in reverse, and those after it are not asked.
type Chain []Hook

// Prestart acquires hook by hook; see Chain for a failure.
func (c Chain) Prestart(r *Run) error {
	for i, h := range c {
		if err := h.Prestart(r); err != nil {
			c[:i].Exited(r)
			return err
		}
	}
	return nil
}

// Adopt has every hook acquire again what r holds, in order.
func (c Chain) Adopt(r *Run) {
	for _, h := range c {
		h.Adopt(r)
	}
}

// Poststart tells every hook, in order, that r is shown running.
func (c Chain) Poststart(r *Run) {
	for _, h := range c {
		h.Poststart(r)
	}
}

// Exited has every hook release what r held, in reverse.
func (c Chain) Exited(r *Run) {
	for i := len(c) - 1; i >= 0; i-- {
		c[i].Exited(r)
	}
}

// Destroy has every hook release what workload held across its runs, in
// reverse.
func (c Chain) Destroy(workload string) {
	for i := len(c) - 1; i >= 0; i-- {
		c[i].Destroy(workload)
	}
}
