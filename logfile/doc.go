// Package logfile manages the log of one workload: its live file, its
// rotated generations and its index, written and read back by position,
// time or line count, so that a reader can resume exactly where it
// stopped, across rotations and daemon restarts.
//
// The daemon writes a log itself (Log.Take, from the run's pipe; Append
// for its own lines): each read is dated with the time it was read, and
// the log is bounded as it is written. Before a write, the live file and
// its marks in the index are held to the size limit, the write cut to
// what fits or the live file first renamed to generation 1: the log then
// never takes more than maxSize × (generations + 1) and the index's
// header, whatever the workload does to its end of the pipe.
//
// A log its workload writes itself, through an inherited O_APPEND
// descriptor (a containerd shim, or a run of a daemon from before pipes,
// adopted as it is), cannot be renamed away from under its writer: it is
// rotated by copy and truncate (Rotate, RotateHeld, with the writers
// frozen) and dated by its modification time whenever the daemon looks
// (Mark); a Rotator does the looking. Such a log grows by what its writer
// writes between two looks.
//
// On disk, for a live file at path:
//
//	path                   the live file
//	path.1 … path.N        older generations, .1 the newest
//	path.rotating          a generation being copied; gone after Rotate
//	path.index             positions and times of the log's bytes (index.go)
//
// Tail, Follow and Rotate are the same operations on the files alone. A
// Book keeps one Log per name, so that a log's writer, its rotation and
// its readers share it; a Rotator looks after the logs runs write
// themselves, woken by a Waker (inotify) when a quiet one is written.
//
// A Log's locks are taken in this order, the left one first when two are
// held: shape → amu → names → the index's, and amu → mu → the index's,
// shape → mu. mu and names are never held together, and the index's is
// taken last and alone of its kind. A rotation by copy holds shape and
// names while it freezes the log's writers (its hold).
//
// This package is not a logging library for flyd itself, does not parse
// log lines, and does not read pipes (logpipe does).
package logfile
