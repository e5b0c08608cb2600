// Package registrar keeps a service registry's view equal to the daemon's
// desired set of instances: the daemon says, per owner (a workload), which
// instances should be registered, and the registrar registers them,
// heart-beats each lease, re-registers what the registry forgot and
// deregisters what is no longer wanted.
//
// It is level-triggered: every request is decided from the difference
// between the desired state and what the registrar believes the registry
// holds, at the moment a worker is free, so a burst of changes or a long
// outage collapses into the few requests that close the gap. A fixed pool
// of workers and one scheduler serve any number of instances.
//
// What an instance says of a workload's endpoint (its name, address and
// the contract's labels) is Instances'. It is not a registry client
// (registryclient speaks the wire) and it does not decide when a workload
// is registered (the supervisor does, as it runs and passes its checks).
// It never stops or touches a workload: an unreachable registry is retried
// with backoff while everything else keeps running.
package registrar
