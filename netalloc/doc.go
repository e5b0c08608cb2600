// Package netalloc owns every port flyd hands out to workloads: hashed
// ports derived from a workload's identity, fixed ports pinned in its
// spec, and ephemeral ports the kernel picks inside the workload's network
// namespace.
//
// A Manager keeps one reservation table per network, persisted so that a
// restarted daemon hands every workload the port it had before, and it
// refuses a port that another workload of the network holds or that a
// process flyd does not manage is listening on. Refusals happen at apply
// time, synchronously, never when the workload starts.
//
// It does not create or enter namespaces on its own (the caller passes a
// Namespace), and it does not keep a port bound for a workload: between a
// reservation and the workload's bind, a process outside flyd can still
// take the port. Isolated networks are how flyd removes that race.
package netalloc
