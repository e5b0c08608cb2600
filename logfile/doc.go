// Package logfile manages the log file of one workload: the file the
// workload writes its stdout and stderr to, its rotated generations, and
// reading them back (Tail, Follow).
//
// The workload writes to the file itself through an inherited O_APPEND
// descriptor; flyd is not in the data path. That way a slow, busy or
// restarting daemon never blocks a workload, and logs keep flowing while
// the daemon is down. The price is that flyd cannot rename the live file
// away from under the writer, so rotation is copy-then-truncate (see
// Rotate).
//
// On disk, for a live file at path:
//
//	path                   the live file, written by the workload
//	path.1 … path.N        older generations, .1 the newest
//	path.rotating          a generation being written; gone after Rotate
//	path.index             positions and times of the log's bytes (index.go)
//
// Log ties them together for the daemon: it rotates, dates what the
// workload wrote (Mark) and reads by position, time or line count
// (Read), so that a reader can resume exactly where it stopped, across
// rotations and daemon restarts. Tail, Follow and Rotate are the same
// operations on the files alone.
//
// This package is not a logging library for flyd itself, does not parse
// log lines, and does not decide when to rotate: the caller calls
// Rotate as often as it likes.
package logfile
