// Package logpipe carries workloads' output to their logs through pipes
// the daemon reads, and keeps those pipes open while no daemon runs.
//
// Each run gets a pipe: its write end is the workload's stdout and
// stderr, its read end stays with the daemon, which reads every pipe
// from one goroutine over one epoll instance (Pipes) into the run's log
// (logfile.Log.Take). A workload that writes faster than its log is
// written blocks on the full pipe: nothing is lost and nothing grows
// without bound.
//
// A read end must outlive the daemon, or a restarting daemon would leave
// writers to EPIPE. A small process of flyd's own, the holder (Serve),
// keeps a copy of every read end, received over a Unix socket in the run
// dir; a starting daemon takes them back from it. The holder keeps no
// workload alive (a read end keeps no writer from exiting), is in no
// workload's cgroup, and leaves with nothing to hold.
//
// This package does not decide where a pipe's bytes go (a Sink does) nor
// which runs get pipes (the supervisor does).
package logpipe
