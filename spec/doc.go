// Package spec defines the workload spec: the document that tells flyd what
// to run and how to keep it running; and the documents beside workloads
// (networks, policies, workspaces), each registered in the table of
// document kinds (RegisterDocKind, DocKinds), and the table of runtimes
// with what a spec of each may hold.
//
// It owns the Go types, strict decoding of YAML and JSON (unknown keys and
// wrong types are refused with the path of the offending field), defaults and
// validation. Every problem that concerns one field is a *FieldError so that
// the CLI and the HTTP API can point at it.
//
// The package only describes workloads. It does not start processes, resolve
// users, allocate ports, read env files or talk to nix or containerd; those
// belong to the packages that consume a validated *Workload. It does not
// interpolate ${VARS} either: ParseAllExpanded hands each value to an
// Expander (package specload's) before decoding it.
package spec
