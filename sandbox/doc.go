// Package sandbox holds the Linux isolation flyd puts around workloads.
//
// Today that is isolated networks: a workload whose spec says
// `network: NAME` runs in a network namespace shared by every workload of
// that network. Networks creates those namespaces (loopback up), persists
// each as a bind mount of its namespace file under the daemon's own run
// directory (never /run/netns, so daemons with different run directories
// cannot collide, and `ip netns` does not see or delete them), opens and
// deletes them. Network.Do runs Go code, and thereby child processes, inside
// one without ever leaving an OS thread of the daemon in the wrong namespace.
//
// It is not a network manager: it makes no veth pairs, addresses, routes or
// firewall rules, allocates no ports (netalloc does, by binding inside Do),
// and does not decide when a network is unused: the supervisor counts
// workloads and calls Delete.
package sandbox
