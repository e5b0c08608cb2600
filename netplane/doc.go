// Package netplane is flyd's network plane: a Plane owns the isolated
// networks (their namespaces, made on first use and deleted when no
// workload uses them, and their links to the host), the ports reserved in
// them and on the host (through netalloc), the network and policy
// documents (recorded in the daemon's store), the workloads' declarations
// (network, endpoints, uses, group of replicas), and the rules all of
// these come to, which it writes through package firewall: each linked
// network's way out and published ports, the policies' guards, and
// declared reach, whose refusals it reads back and reports (WatchReach).
//
// The supervisor calls it once on a workload's way in (Attach, or Reserve
// then Project for a batch) and once on its way out (Detach); Release
// frees what a workload holds in one network (it moved, or its record is
// lost). Each run joins its network's namespace through the plane's run
// hook (Hook). The projections of rules from declarations (Project,
// ReachRules, DeclaredReach) are pure functions of a World, table-tested
// without a kernel.
//
// It is not where a workload's process is put in a namespace (sandbox and
// the drivers do that), nor where nftables is spoken (firewall), nor what
// decides who may change a document (authz, documents).
//
// # Locks
//
// A Plane has five mutexes, a coalescer and an atomic map:
//
//   - mu orders making a network against deleting it once unused: it is
//     held through Reserve, Drop and DeleteNetwork.
//   - docMu guards policies, and is held while netDocs is replaced; it is
//     held through every projection written (writeGuardsOf, writeReach),
//     so that what is in force is what the documents say.
//   - netDocs (atomic) is the network documents, replaced whole under
//     docMu and read without it.
//   - linkMu guards links; it is held while a network's link is made and
//     its first rules written (Namespace) and while links are learnt at
//     start (syncLinks).
//   - rulesMu has a network's rules computed and written as one (setRules),
//     so that rules computed later are never overwritten by rules computed
//     earlier (two replicas of a group turning ready at once).
//   - declMu guards decls, appliers, members, quarantined, serving and
//     replicas. Nothing else is taken while it is held.
//   - guards (a coalescer, with a mutex of its own that is never held
//     while a projection runs) has one projection written at a time, and
//     callers that ask meanwhile share the next.
//   - declared.mu guards declared reach's state (the cgroup tree, the ids
//     and names written, the last plan); declared.watch.mu guards the
//     refusals counted, and is held while declared.mu is taken
//     (noteRefusals → targetOf).
//   - connect.mu guards the connect map's contents by network, and is held
//     while the map is written; it is taken last (after rulesMu, or alone)
//     and nothing is taken under it.
//
// When two are held together, the one on the left was taken first:
//
//	mu → a projection (guards) → docMu → linkMu → rulesMu → declMu
//	docMu → declared.mu;  declared.watch.mu → declared.mu
//
// mu is also held while docMu, linkMu and declMu are taken directly, and
// linkMu while declMu is (a network's rules read the groups and who is
// exposed); linkMu, mu and docMu are held while the firewall's, netalloc's
// and sandbox's own locks are taken, and none of those calls back. A
// projection must never be asked for (writeGuards) while docMu is held:
// it would wait for a run that waits for docMu (SetPolicy, which holds
// docMu, writes its projection itself for that reason). netDocs is read
// without docMu so that a network's rules, written with linkMu held, never
// wait for docMu. declMu is never held while another is taken, and
// declared.mu is never held together with linkMu or declMu.
package netplane
