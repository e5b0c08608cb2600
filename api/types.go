// Package api is flyd's wire as a client sees it: the JSON types of the
// local API, its error codes and bounds, and the Go client that the CLI and
// the tests use over the Unix socket. The server is package api/server,
// and what serves the supervisor through it is daemon.Backend.
//
// It holds neither supervision logic nor who may come in: the first lives
// in package supervisor, the second in api/server.
package api

import (
	"time"

	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/status"
)

// State is a workload's place in its lifecycle: the supervisor's words,
// shown as they are.
type State = status.State

const (
	StatePending   = status.Pending
	StatePreparing = status.Preparing
	StateStarting  = status.Starting
	StateRunning   = status.Running
	StateStopping  = status.Stopping
	StateStopped   = status.Stopped
	StateExited    = status.Exited
	StateScheduled = status.Scheduled
	StateBackoff   = status.Backoff
	StateFailed    = status.Failed
	StateUnknown   = status.Unknown
)

// States lists every state in lifecycle order.
var States = status.States

// Exit is how a run ended, as the daemon says it.
type Exit struct {
	Code   int       `json:"code"`
	Signal string    `json:"signal,omitempty"`
	At     time.Time `json:"at"`
	// Unknown is set for a run adopted from an earlier daemon, whose status
	// could not be collected.
	Unknown bool `json:"unknown,omitempty"`
	// Reason says why, when the runtime knows more than the status (the
	// memory limit's OOM kill).
	Reason string `json:"reason,omitempty"`
	// Description says all of it in words: what `flyd ps` shows.
	Description string `json:"description"`
}

func (e *Exit) String() string { return e.Description }

// LimitHits counts what a workload's limits did: processes the memory
// limit's OOM killer killed, forks the pids limit refused, since the
// daemon began watching.
type LimitHits struct {
	OOMKills     int        `json:"oom_kills,omitempty"`
	LastOOMKill  *time.Time `json:"last_oom_kill,omitempty"`
	PidsRefusals int        `json:"pids_refusals,omitempty"`
	LastRefusal  *time.Time `json:"last_pids_refusal,omitempty"`
}

// Settle is how long a workload without a health check runs before it is
// up (Workload.Up).
const Settle = status.Settle

// Workload is one workload as the API shows it. Spec is redacted: secret
// values never leave the daemon.
type Workload struct {
	Name  string    `json:"name"`
	Kind  spec.Kind `json:"kind"`
	State State     `json:"state"`
	Since time.Time `json:"since"`
	// Reason says why the workload is in its state, when there is more to
	// say: what it waits for, what it prepares, why it failed.
	Reason      string     `json:"reason,omitempty"`
	PID         int        `json:"pid,omitempty"`
	ContainerID string     `json:"container_id,omitempty"`
	StartedAt   *time.Time `json:"started_at,omitempty"`
	Restarts    int        `json:"restarts"`
	LastExit    *Exit      `json:"last_exit,omitempty"`
	LimitHits   *LimitHits `json:"limit_hits,omitempty"`
	// NotifyRefused counts datagrams at its notify socket from processes
	// not of the workload, which were ignored.
	NotifyRefused int            `json:"notify_refused,omitempty"`
	LastError     string         `json:"last_error,omitempty"`
	NextStart     *time.Time     `json:"next_start,omitempty"`
	Healthy       *bool          `json:"healthy,omitempty"`
	Ports         []PortMapping  `json:"ports,omitempty"`
	Spec          *spec.Workload `json:"spec,omitempty"`
	// Owner is the workloads-directory file the workload comes from.
	Owner string `json:"owner,omitempty"`
	// Up says the workload is up, as the daemon judges it: running and
	// past its health check (without one, running for a second), or
	// exited 0; NotUp, when it is not and will not be without a change,
	// says why (failed, stopped, exited with an error). `--wait` asks.
	Up    bool   `json:"up"`
	NotUp string `json:"not_up,omitempty"`
	// AppliedBy is the uid of the caller that applied it (0: root, or the
	// workloads directory).
	AppliedBy uint32 `json:"applied_by"`
	// Group is the group of replicas it is one of (a spec's replicas).
	Group string `json:"group,omitempty"`
}

// PortMapping publishes one endpoint's allocation.
type PortMapping struct {
	Workload string `json:"workload"`
	Endpoint string `json:"endpoint"`
	API      string `json:"api"`
	Port     int    `json:"port"`
	// Published is the host port the endpoint is published on, if it is.
	Published int    `json:"published,omitempty"`
	Network   string `json:"network"`
	// Location is "external" for an endpoint outside the system.
	Location  string     `json:"location,omitempty"`
	Instances []Instance `json:"instances"`
}

// Address is the endpoint's address for an access ("native" from the
// host, "container" from its own network, "public"), empty without one.
func (p PortMapping) Address(access string) string {
	for _, in := range p.Instances {
		if in.Access == access {
			return in.Address
		}
	}
	return ""
}

// Instance is one way to reach an endpoint.
type Instance struct {
	Access  string `json:"access"`
	Address string `json:"address"`
}

// Network is an isolated network and the workloads in it.
type Network struct {
	Name      string   `json:"name"`
	Path      string   `json:"path"`
	Workloads []string `json:"workloads"`
	// Link is the host end of its veth; Address its own address, which
	// the host reaches it on, and Gateway the host's, its way out.
	Link    string `json:"link,omitempty"`
	Address string `json:"address,omitempty"`
	Gateway string `json:"gateway,omitempty"`
	// Egress says its traffic may leave through the host.
	Egress bool `json:"egress"`
	// Published are its ports reached at a port of the host.
	Published []Published `json:"published,omitempty"`
	// Hosts is the file its runs have as /etc/hosts, naming its workloads,
	// while one runs (`flyd exec` binds it too).
	Hosts string `json:"hosts,omitempty"`
}

// Published is one published port of a network.
type Published struct {
	HostPort int    `json:"host_port"`
	Port     int    `json:"port"`
	Workload string `json:"workload"`
	Endpoint string `json:"endpoint"`
}

// Policy is a policy document and what it is in force for.
type Policy struct {
	Name string       `json:"name"`
	Spec *spec.Policy `json:"spec"`
	// Guards are the networks it is in force for now.
	Guards []string `json:"guards"`
	// Problems say what of it is not in force, and why.
	Problems []string `json:"problems,omitempty"`
}

// Stats is one sample of the running workloads' usage: GET /v1/stats.
type Stats struct {
	At time.Time `json:"at"`
	// IntervalMS is how often the daemon samples; polling faster reads
	// the same sample.
	IntervalMS int64   `json:"interval_ms"`
	Workloads  []Usage `json:"workloads"`
}

// Usage is what one workload's processes use, from its cgroup.
type Usage struct {
	Workload    string  `json:"workload"`
	CPUSeconds  float64 `json:"cpu_seconds"`
	MemoryBytes int64   `json:"memory_bytes"`
	Processes   int     `json:"processes"`
}

// Status describes the daemon.
type Status struct {
	Version   string          `json:"version"`
	PID       int             `json:"pid"`
	StartedAt time.Time       `json:"started_at"`
	Uptime    string          `json:"uptime"`
	Workloads int             `json:"workloads"`
	States    map[State]int   `json:"states"`
	Runtimes  map[string]bool `json:"runtimes"`
	Registry  RegistryStatus  `json:"registry"`
	// Streams counts open log and event streams; it returns to zero when
	// their clients go away.
	Streams int64 `json:"streams"`
	// LastEvent is the number of the last event published: a reader that
	// opens the stream with after=LastEvent misses nothing, and one that
	// loses the daemon before any event came resumes from it.
	LastEvent uint64 `json:"last_event"`
	// FileProblems are the files of the workloads directory that could not
	// be applied, and why.
	FileProblems []FileProblem `json:"file_problems,omitempty"`
	// Quarantined are the stored workload records this daemon could not
	// load. Each is kept as it is, its run left alive, until its name is
	// applied again or removed.
	Quarantined []Quarantined `json:"quarantined,omitempty"`
	// PublishedPorts says how a host-local client reaches a published
	// port: rewritten once at connect() by the daemon's BPF programs, with
	// nftables' DNAT beneath, or through nftables alone (and why).
	PublishedPorts string `json:"published_ports,omitempty"`
}

// RegistryStatus is how heart-beating into the registry goes. An empty URL
// means the registry is off.
type RegistryStatus struct {
	URL string `json:"url,omitempty"`
	// KeyFile is where the daemon reads the registry's API key: a path,
	// never the key, so that `flyd registry ls` can use the same one.
	KeyFile    string `json:"key_file,omitempty"`
	Desired    int    `json:"desired"`
	Registered int    `json:"registered"`
	Failing    int    `json:"failing"`
	Heartbeats uint64 `json:"heartbeats"`
	Failures   uint64 `json:"failures"`
	LastError  string `json:"last_error,omitempty"`
}

// FileProblem is a workloads-directory file that changes nothing until
// it is fixed.
type FileProblem struct {
	File  string `json:"file"`
	Error string `json:"error"`
}

// Quarantined is a stored workload record that does not load.
type Quarantined struct {
	Name  string `json:"name"`
	Error string `json:"error"`
	// PID is the run an earlier daemon left of it, kept alive; 0 when
	// there is none.
	PID int `json:"pid,omitempty"`
}

// Event is one change the daemon reports on /v1/events.
type Event struct {
	// Seq numbers the daemon's events, on across its restarts: a reader
	// that lost the daemon asks for the events after the last it had.
	Seq      uint64    `json:"seq"`
	Time     time.Time `json:"time"`
	Type     string    `json:"type"`
	Workload string    `json:"workload,omitempty"`
	Project  string    `json:"project,omitempty"`
	State    State     `json:"state,omitempty"`
	Message  string    `json:"message,omitempty"`
	Exit     *Exit     `json:"exit,omitempty"`
}

// Event types.
const (
	EventApplied  = status.EventApplied
	EventRemoved  = status.EventRemoved
	EventState    = status.EventState
	EventExit     = status.EventExit
	EventHealth   = status.EventHealth
	EventRestart  = status.EventRestart
	EventFollow   = status.EventFollow
	EventSchedule = status.EventSchedule
	EventReload   = status.EventReload
	EventWatch    = status.EventWatch
	EventLimit    = status.EventLimit
	EventError    = status.EventError
	EventFile     = status.EventFile
	EventRegistry = status.EventRegistry
	EventNetwork  = status.EventNetwork
	EventPolicy   = status.EventPolicy
)
