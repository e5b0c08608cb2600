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
// writers to EPIPE. A small process of flyd's own, the holder (package holder, run as flyd-log-holder),
// keeps a copy of every read end, received over a Unix socket in the run
// dir; a starting daemon takes them back from it. The holder keeps no
// workload alive (a read end keeps no writer from exiting), is in no
// workload's cgroup, and leaves with nothing to hold.
//
// Hook is the logs step of a run (runhook.Hook): a pipe for every run
// whose runtime does not write its log file itself, the log file for one
// that does (looked after by logfile's Rotator), the ended run's last
// output drained into its log, the log files removed with the workload.
// Pipes themselves do not decide where their bytes go (a Sink does), and
// the package writes, rotates and reads no log file: package logfile does.
//
// Which lock of Pipes guards which field, and their order, is said on the
// type.
package logpipe
