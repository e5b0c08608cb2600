// Package status is what the supervisor knows of its workloads: their
// states, how their runs ended, their ports and networks, and the events
// it reports. It is the supervisor's own vocabulary, free of any wire or
// disk format: package api converts it to the JSON the API speaks, and
// the supervisor's store keeps what it persists in records of its own.
// So a field renamed on the wire is no state migration, and the state a
// workload is in can grow without the API noticing.
//
// It imports nothing of flyd but spec, so every package may use it.
package status

import (
	"time"

	"github.com/flyd-dev/flyd/spec"
)

// State is a workload's place in its lifecycle. Its values are the words
// the API and the CLI show.
type State string

const (
	Pending   State = "pending"
	Preparing State = "preparing"
	Starting  State = "starting"
	Running   State = "running"
	Stopping  State = "stopping"
	Stopped   State = "stopped"
	Exited    State = "exited"
	// Scheduled is a one-shot at rest whose schedule is armed: its next
	// run is at NextStart.
	Scheduled State = "scheduled"
	Backoff   State = "backoff"
	Failed    State = "failed"
	// Unknown is a run of an earlier daemon that could not be adopted
	// yet (its runtime is down): it may still be alive, so nothing else
	// starts until adoption is retried and says.
	Unknown State = "unknown"
)

// States lists every state in lifecycle order.
var States = []State{Pending, Preparing, Starting, Running, Stopping, Stopped, Exited, Scheduled, Backoff, Failed, Unknown}

// Workload is one workload as the supervisor sees it.
type Workload struct {
	Name  string
	Kind  spec.Kind
	State State
	Since time.Time
	// Reason says why the workload is in its state, when there is more to
	// say: what it waits for, what it prepares, why it failed.
	Reason      string
	PID         int
	ContainerID string
	StartedAt   *time.Time
	Restarts    int
	LastExit    *Exit
	LimitHits   *LimitHits
	// NotifyRefused counts datagrams at its notify socket from processes
	// not of the workload, ignored.
	NotifyRefused int
	LastError     string
	NextStart     *time.Time
	Healthy       *bool
	// Checked says its spec has a health check: it is up once the check
	// passed. Disabled says its spec is disabled: at rest, it is up.
	Checked, Disabled bool
	Ports             []PortMapping
	// Spec is the workload's spec; a snapshot for others has it redacted.
	Spec *spec.Workload
	// AppliedBy is the uid of the caller that applied it.
	AppliedBy uint32
	// Owner is the workloads-directory file the workload comes from.
	Owner string
	// Group is the group of replicas it is one of, or "".
	Group string
}

// Exit is how a run ended.
type Exit struct {
	Code   int
	Signal string
	At     time.Time
	// Unknown is set for a run adopted from an earlier daemon, whose
	// status could not be collected.
	Unknown bool
	// Reason says why, when the runtime knows more than the status (the
	// memory limit's OOM kill).
	Reason string
	// Description says all of it in words.
	Description string
}

func (e *Exit) String() string { return e.Description }

// Succeeded says whether the run is known to have exited 0.
func (e *Exit) Succeeded() bool { return e != nil && !e.Unknown && e.Code == 0 && e.Signal == "" }

// LimitHits counts what a workload's limits did to its processes.
type LimitHits struct {
	OOMKills     int
	LastOOMKill  *time.Time
	PidsRefusals int
	LastRefusal  *time.Time
}

// PortMapping is one endpoint's allocation.
type PortMapping struct {
	Workload string
	Endpoint string
	API      string
	Port     int
	// Published is the host port the endpoint is published on, if it is.
	Published int
	Network   string
	// Location is "external" for an endpoint outside the system, whose
	// instances are the address its spec gives.
	Location  string
	Instances []Instance
}

// Address is the endpoint's address for an access ("native",
// "container", "public"), empty when it has none.
func (p PortMapping) Address(access string) string {
	for _, in := range p.Instances {
		if in.Access == access {
			return in.Address
		}
	}
	return ""
}

// SamePorts says whether two allocations of a workload's endpoints, in
// the same order, give every endpoint the same port and published port:
// a spec applied again over the same allocation changes nothing.
func SamePorts(a, b []PortMapping) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Endpoint != b[i].Endpoint || a[i].Port != b[i].Port || a[i].Published != b[i].Published {
			return false
		}
	}
	return true
}

// Instance is one way to reach an endpoint.
type Instance struct {
	Access  string
	Address string
}

// Network is an isolated network and what uses it.
type Network struct {
	Name      string
	Path      string
	Workloads []string
	// Link is the host end of its veth; Address its own address, which
	// the host reaches it on, and Gateway the host's, its way out.
	Link    string
	Address string
	Gateway string
	// Egress says its traffic may leave through the host.
	Egress bool
	// Published are its ports reached at a port of the host.
	Published []Published
}

// Published is a port of a network reached at a port of the host.
type Published struct {
	HostPort int
	Port     int
	Workload string
	Endpoint string
}

// Policy is a policy document and what it guards now.
type Policy struct {
	Name string
	Spec *spec.Policy
	// Guards are the networks it is in force for.
	Guards []string
	// Problems say what of it is not in force, and why: names of nothing
	// (yet), workloads on the host's network.
	Problems []string
}

// FileProblem is a workloads-directory file that changes nothing until
// it is fixed.
type FileProblem struct {
	File  string
	Error string
}

// Quarantined is a stored workload record that does not load.
type Quarantined struct {
	Name  string
	Error string
	// PID is the run an earlier daemon left of it, kept alive; 0 when
	// there is none.
	PID int
}

// Event is one change the supervisor reports.
type Event struct {
	// Seq numbers the events, on across daemon restarts.
	Seq      uint64
	Time     time.Time
	Type     string
	Workload string
	// Project is the project of the workload or document the event is
	// of ("" for the default project's, or the daemon's own).
	Project string
	State   State
	Message string
	Exit    *Exit
	// By is the uid of the caller that applied the workload the event is
	// of (0: root, the workloads directory, or none): a confined reader
	// is given its own workloads' events alone.
	By uint32
}

// Event types.
const (
	EventApplied = "applied"
	EventRemoved = "removed"
	EventState   = "state"
	EventExit    = "exit"
	EventHealth  = "health"
	EventRestart = "restart"
	// EventSchedule is a run its schedule started, or a time of it
	// skipped because the run before was still going.
	EventSchedule = "schedule"
	// EventFollow is a run stopped because a workload it follows
	// (spec.AfterFollows) ended its run.
	EventFollow = "follow"
	EventReload = "reload"
	// EventWatch is what a watch entry did about files that changed.
	EventWatch = "watch"
	// EventLimit is a process killed, or a fork refused, by a limit.
	EventLimit = "limit"
	EventError = "error"
	// EventFile reports a workloads-directory file that is refused, and
	// when it is good again.
	EventFile = "file"
	// EventRegistry reports an instance the registry refuses or cannot be
	// reached for, and its recovery.
	EventRegistry = "registry"
	// EventNetwork and EventPolicy report a network or policy document
	// applied or removed: every kind of document beside workloads reports
	// its changes under its kind's name (a workspace's are "workspace").
	EventNetwork = "network"
	EventPolicy  = "policy"
	// EventProject reports a project taken down by the daemon: its lease
	// lapsed, its client gone.
	EventProject = "project"
)

// Usage is what a workload's processes use, read from its cgroup.
type Usage struct {
	Workload string
	// CPU is the CPU time its processes used; a reader's rate is the
	// difference between two samples over their interval.
	CPU    time.Duration
	Memory int64
	Procs  int
}

// Stats is one sample of every running workload's usage.
type Stats struct {
	At time.Time
	// Interval is how often the daemon samples: no sooner is a new one
	// there to be read.
	Interval  time.Duration
	Workloads []Usage
}

// Daemon is the daemon as the supervisor sees it: what it runs, on what,
// and how registration goes.
type Daemon struct {
	Version      string
	PID          int
	StartedAt    time.Time
	Workloads    int
	States       map[State]int
	Runtimes     map[string]bool
	Registry     Registry
	LastEvent    uint64 // the number of the last event published
	FileProblems []FileProblem
	Quarantined  []Quarantined
	// PublishedPorts says how a host-local client reaches a published
	// port: rewritten at connect() (BPF) or nftables alone, and why.
	PublishedPorts string
}

// Registry is how heart-beating into the registry goes; an empty URL means
// the registry is off. KeyFile is a path, never the key.
type Registry struct {
	URL, KeyFile                 string
	Desired, Registered, Failing int
	Heartbeats, Failures         uint64
	LastError                    string
}

// Settle is how long a workload without a health check must have run to
// count as up: a program that dies at once must not pass for started.
const Settle = time.Second

// Readiness judges whether the workload is up at now: running and past its
// health check (with one, up only once it has passed: a check that has not
// reported yet is not a pass; without one, running for Settle), or exited
// 0. When it is
// not up and will not be without a change (failed, stopped, exited with an
// error), never says why.
func (w Workload) Readiness(now time.Time) (up bool, never string) {
	switch {
	case w.State == Failed:
		return false, "failed: " + w.LastError
	case w.State == Stopped && w.Disabled:
		// Applied to be started when asked: what an up brings up
		// leaves it at rest.
		return true, ""
	case w.State == Stopped:
		return false, "stopped"
	case w.State == Exited && w.LastExit.Succeeded():
		return true, ""
	case w.State == Exited:
		return false, "exited: " + w.Reason
	case w.State == Scheduled:
		// Armed is all a scheduled workload is until its time comes.
		return true, ""
	case w.State != Running:
		return false, ""
	case w.Healthy != nil:
		return *w.Healthy, ""
	case w.Checked:
		return false, ""
	}
	return w.StartedAt != nil && now.Sub(*w.StartedAt) >= Settle, ""
}
