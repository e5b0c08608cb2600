// Package sandbox holds the Linux isolation flyd puts around workloads:
// isolated networks and a cgroup per workload.
//
// Networks: a workload whose spec says `network: NAME` runs in a network
// namespace shared by every workload of that network. Networks creates
// those namespaces (loopback up), persists each as a bind mount of its
// namespace file under the daemon's own run directory (never /run/netns,
// so daemons with different run directories cannot collide, and `ip
// netns` does not see or delete them), opens and deletes them. Network.Do
// runs Go code, and thereby child processes, inside one without ever
// leaving an OS thread of the daemon in the wrong namespace.
//
// Cgroups: each workload gets a cgroup under one parent, on cgroup v2 or
// the v1 hierarchies, with its limits; Start forks a child born inside its
// network and its cgroup at once; Kill ends every process of a cgroup,
// including those that left their session, without racing their forks.
//
// It is not a network or resource manager: it makes no veth pairs,
// addresses or firewall rules, allocates no ports (netalloc does, by
// binding inside Do), and decides nothing about lifecycles: the supervisor
// counts workloads and calls Delete.
package sandbox
