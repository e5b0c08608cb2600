// Package health checks that a workload answers. A Probe checks once: a TCP
// connect, an HTTP GET, or a command that must exit 0, each run inside the
// workload's network namespace (and, for a command, its cgroup), so that a
// probe sees exactly the ports the workload sees. A Monitor runs one probe
// on a schedule and turns its results into a healthy or unhealthy verdict,
// with a start period and a threshold of consecutive failures.
//
// A program may also tell its health itself: on a notify socket (Notify),
// READY=1 and, to a Watchdog, its keepalives; or by a line of its output,
// which a LogCheck matches (Lines) as the run's log is written.
//
// It is not the supervisor: it restarts nothing, reads no spec and resolves
// no endpoint names. The supervisor builds probes from spec.Health with
// addresses it allocated, and decides what a verdict means (dependants may
// start, the workload restarts).
package health
