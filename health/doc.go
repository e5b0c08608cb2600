// Package health checks that a workload answers. A Probe checks once: a TCP
// connect, an HTTP GET, or a command that must exit 0, each run inside the
// workload's network namespace (and, for a command, its cgroup), so that a
// probe sees exactly the ports the workload sees. A Monitor runs one probe
// on a schedule and turns its results into a healthy or unhealthy verdict,
// with a start period and a threshold of consecutive failures.
//
// A program may also tell its health itself: on a notify socket (Notify,
// RunNotify for one run), READY=1 and, to a Watchdog, its keepalives; or
// by a line of its output, which a LogCheck matches (Lines) as the run's
// log is written (FollowLog). Told judges such a run.
//
// A Hook keeps the checks of one workload's current run, on its owner's
// loop: made ready before the run starts, started and stopped with it,
// with what the run said of its readiness; it is the notify-and-health
// step of the run (runhook.Hook). It builds a check from a spec's
// health section (ProbeOf), with the ports it is given, but it is not the
// supervisor: it restarts nothing, resolves no endpoint names and starts
// no run. The supervisor gives it addresses it allocated and the run's
// pid, and decides what a verdict means (dependants may start, the
// workload restarts).
package health
