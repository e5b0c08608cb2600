// Package sandbox holds the Linux isolation flyd puts around workloads:
// isolated networks, a cgroup per workload, and the mounts a run sees in
// place of the host's.
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
// A network may be linked to the host (Connect): a veth pair whose host
// end (fly-N) and inner end (eth0) take one /30 of a pool, with the
// default route inside through the host's end; a deleted network's link
// is retired at once and deleted in the background (Wait).
//
// Cgroups: each workload gets a cgroup under one parent, on cgroup v2 or
// the v1 hierarchies, with its limits, and on a hybrid host a v2 cgroup of
// the same name its sockets are told apart by (SocketID); Start forks a
// child born inside its network and its cgroup at once; Kill ends every
// process of a cgroup, including those that left their session, without
// racing their forks; Usage, OOMKills and PidsRefusals read what the
// kernel counted.
//
// Mounts: StartWithMounts starts a child in a mount namespace of its own
// with a project's /dev/shm (a tmpfs kept by Shms) and a run's own /tmp
// and /var/tmp (MakeTmp) bound in place of the host's.
//
// It is not a network or resource manager: it writes no firewall rules
// (firewall does), allocates no ports (netalloc does, by binding inside
// Do), chooses no network's pool or addresses beyond the next free /30,
// and decides nothing about lifecycles: the network plane, the supervisor
// and the hooks count users and call Delete and Release.
//
// Its locks: each cgroup has one (cgroupLocks), shared by starts and
// exclusive for kills and deletes; Networks orders its changes with a
// mutex and the directory's flock, held together; Shms has a mutex of its
// own. None is held while another of them is taken.
package sandbox
