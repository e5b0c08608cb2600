// Package declarative keeps the workloads defined by the spec files of one
// directory (flyd's --workloads-dir) applied: a file dropped there creates or
// replaces its workloads, a file removed there removes them.
//
// It is level-triggered. fsnotify only says "something changed"; every
// (debounced) change re-reads the whole directory and reconciles the workloads
// the files define against the ones the watcher applied before, so editor
// write patterns, lost events and restarts all converge to the same state.
// Each workload is owned by the file (base name) that defines it; a bad file
// is reported as a Problem and leaves its workloads as they were.
//
// The files' ${VAR}s take their values from the directory's .env alone,
// never from the daemon's environment, and a variable with neither value
// nor default makes its file a problem; env_file names NAME.env files of
// the directory. Both are read only when trusted as the spec files are
// (internal/trust). A workload with profiles is left out: the directory
// asks for none.
//
// It is not the supervisor: it decides what should exist and drives an
// Applier. It does not parse specs either (package spec does) and knows
// nothing about the API or the CLI.
package declarative
