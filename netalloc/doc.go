// Package netalloc will own every port flyd hands out to workloads:
// hashed ports derived from a workload's identity, fixed ports pinned in
// configuration, and ephemeral ports allocated per network namespace.
//
// Today it holds only the hashed algorithm, which must stay bit-for-bit
// compatible with codefly so that a service keeps the same port whichever
// tool starts it. It is not a port-conflict detector: two identities may
// hash to the same port, and resolving that is the allocator's job, not
// this function's.
package netalloc
