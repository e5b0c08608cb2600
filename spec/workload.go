package spec

import (
	"maps"
	"strconv"
	"strings"
)

// Kind selects how a workload's process is produced: one of the runtimes
// registered in the table (runtime.go), each by its own file.
type Kind string

// NetworkHost is the default network: the workload shares the host's.
const NetworkHost = "host"

// Workload is one supervised unit. Parse and DecodeJSON return it with
// defaults applied and validated; code that builds one by hand should call
// SetDefaults and Validate before using it.
type Workload struct {
	Name string `json:"name"`
	// Project is the project the workload belongs to (project.go); empty
	// for the default project, or the one its full name says.
	Project  string    `json:"project,omitempty"`
	Kind     Kind      `json:"kind,omitempty"`
	Identity *Identity `json:"identity,omitempty"`
	Command  []string  `json:"command,omitempty"`
	Workdir  string    `json:"workdir,omitempty"`
	User     string    `json:"user,omitempty"`
	// PrivateTmp gives each run a /tmp and /var/tmp of its own, empty at
	// its start and removed at its end, as systemd's PrivateTmp= (a host
	// runtime's: a container has its own).
	PrivateTmp bool              `json:"private_tmp,omitempty"`
	Env        map[string]string `json:"env,omitempty"`
	SecretEnv  map[string]string `json:"secret_env,omitempty"`
	// EnvFile names env files (KEY=VALUE lines, a string or a list),
	// relative to the spec file's directory, whose variables the reader
	// of the file (flyd apply, the workloads directory) puts in env,
	// env and secret_env winning, before the workload is applied. The
	// API refuses it: a file is read where the spec file is.
	EnvFile StringList `json:"env_file,omitempty"`
	// Profiles leave the workload out unless one of them is asked for
	// (flyd apply --profile); a workload without profiles is always in.
	Profiles []string `json:"profiles,omitempty"`
	// Disabled: the workload is applied and listed, and no apply, up or
	// daemon start starts it; `flyd start` does, and a run so started is
	// kept as any other (process-compose's disabled).
	Disabled bool `json:"disabled,omitempty"`
	// Configuration is the service's configuration, by name, each a map
	// of keys to values, given to it and to every workload that uses it
	// under codefly's names (CODEFLY__SERVICE_CONFIGURATION__MODULE__
	// SERVICE__NAME__KEY); SecretConfiguration the same for secrets
	// (…_SECRET_CONFIGURATION__…), redacted as secret_env is.
	Configuration       Configurations `json:"configuration,omitempty"`
	SecretConfiguration Configurations `json:"secret_configuration,omitempty"`
	Endpoints           []Endpoint     `json:"endpoints,omitempty"`
	Network             string         `json:"network,omitempty"`
	Restart             Restart        `json:"restart"`
	Stop                Stop           `json:"stop"`
	Health              *Health        `json:"health,omitempty"`
	Resources           *Resources     `json:"resources,omitempty"`
	After               []string       `json:"after,omitempty"`
	// Uses are the workloads whose endpoints this one calls: "NAME" for
	// all of them, "NAME/ENDPOINT" for one. Each used endpoint's address
	// arrives as codefly's CODEFLY__ENDPOINT__… variable, and a used
	// workload is waited for as `after: [NAME]` would.
	Uses []string `json:"uses,omitempty"`
	// Schedule runs the workload, a one-shot, at the times it names:
	// cron's five fields or a descriptor (schedule.go), in the daemon's
	// time zone unless a CRON_TZ= prefix names another. Applying it arms
	// the schedule; it does not start a run.
	Schedule string `json:"schedule,omitempty"`
	// Replicas runs the workload as a group of that many, NAME-1 to
	// NAME-N (replicas.go), each with ports of its own and a published
	// port balanced across the ready ones. Without it, one workload NAME.
	Replicas int `json:"replicas,omitempty"`
	// ReplicaOf is the group a replica belongs to: flyd's own, set on the
	// replicas it makes and refused from a caller.
	ReplicaOf string `json:"replica_of,omitempty"`
	// Forking says the program daemonizes and leaves a pid file
	// (forking.go); without it, the process flyd starts is the run's
	// main process.
	Forking *Forking `json:"forking,omitempty"`
	// Reload is what `flyd reload` does; without it, reload is refused.
	Reload     *Reload     `json:"reload,omitempty"`
	Registry   *Registry   `json:"registry,omitempty"`
	Nix        *Nix        `json:"nix,omitempty"`
	Containerd *Containerd `json:"containerd,omitempty"`
	// Watch restarts, rebuilds or syncs the workload when files change
	// (watch.go), while Watching is on: flyd up --watch sets it.
	Watch    []Watch `json:"watch,omitempty"`
	Watching bool    `json:"watching,omitempty"`
}

// Identity places the workload in the workspace/module/service hierarchy; it
// is the input of hashed ports and the registry entry, so it must be stable.
type Identity struct {
	Workspace string `json:"workspace,omitempty"`
	Module    string `json:"module,omitempty"`
	Service   string `json:"service,omitempty"`
	// Version is the service's version, given to it as
	// CODEFLY__SERVICE_VERSION when stated.
	Version string `json:"version,omitempty"`
}

// Identified is w's identity, defaulted so that every workload has stable
// hashed ports: workspace "default", module and service its name.
func (w *Workload) Identified() Identity {
	name := BareName(w.Name)
	id := Identity{Workspace: "default", Module: name, Service: name}
	if w.Identity != nil {
		if w.Identity.Workspace != "" {
			id.Workspace = w.Identity.Workspace
		}
		if w.Identity.Module != "" {
			id.Module = w.Identity.Module
		}
		if w.Identity.Service != "" {
			id.Service = w.Identity.Service
		}
		id.Version = w.Identity.Version
	}
	return id
}

// Configurations are configurations by name, each its keys' values.
type Configurations map[string]map[string]string

// clone is a deep copy.
func (c Configurations) clone() Configurations {
	if c == nil {
		return nil
	}
	out := make(Configurations, len(c))
	for n, kv := range c {
		out[n] = maps.Clone(kv)
	}
	return out
}

// Endpoint is a named port the workload listens on. Its number reaches the
// process as PORT_<EnvName(Name)>.
type Endpoint struct {
	Name string `json:"name"`
	API  string `json:"api,omitempty"` // tcp (default) | http | rest | grpc | other
	Port Port   `json:"port,omitzero"`
	// Publish makes an endpoint of an isolated network reachable on the
	// host at a host port: hashed, ephemeral or a number. Zero: not
	// published.
	Publish Port `json:"publish,omitzero"`
	// Visibility says who may reach the endpoint: private (workloads of
	// the same identity.module), internal (the default: any workload of
	// this host) or public (from beyond the host too).
	Visibility string `json:"visibility,omitempty"`
	// Exposure says whether it has an address beyond the host: public
	// (its `public` instance, at --advertise-address) or none. A public
	// endpoint states it; the others cannot be exposed.
	Exposure string `json:"exposure,omitempty"`
	// Location says where it lives: in the system (unset, or none: a
	// port flyd allocates) or external, at Address, which flyd gives its
	// consumers and allocates nothing for.
	Location string `json:"location,omitempty"`
	// Address is an external endpoint's: host:port, or a URL
	// (https://api.example.com:443) for an HTTP-based API.
	Address string `json:"address,omitempty"`
}

// Endpoint visibilities and exposures.
const (
	VisibilityPrivate  = "private"
	VisibilityInternal = "internal"
	VisibilityPublic   = "public"
	// VisibilityNone says none, as leaving it out does: the default.
	VisibilityNone = "none"
	ExposurePublic = "public"
	ExposureNone   = "none"
)

// Reach is the endpoint's visibility with its default, internal. codefly
// core reads an unset visibility as private; flyd cannot: every workload
// is a module of its own unless its identity says otherwise, so a private
// default would refuse every `uses` of a spec that names no module.
func (e Endpoint) Reach() string {
	if e.Visibility == "" || e.Visibility == VisibilityNone {
		return VisibilityInternal
	}
	return e.Visibility
}

// LocationExternal is where a managed resource outside the system lives.
const (
	LocationExternal = "external"
	LocationNone     = "none"
)

// External says whether the endpoint lives outside the system.
func (e Endpoint) External() bool { return e.Location == LocationExternal }

// Exposed says whether the endpoint has an address beyond the host.
func (e Endpoint) Exposed() bool { return e.Exposure == ExposurePublic }

// Stop says how to ask the workload to exit before it is killed.
type Stop struct {
	Signal  string   `json:"signal,omitempty"` // default SIGTERM
	Timeout Duration `json:"timeout,omitzero"` // default 10s; then SIGKILL
	// Mode says who gets the stop signal: "group" (the default), every
	// process of the workload; "main", its main process alone, which
	// stops the others itself (postgres: its backends take SIGINT for
	// "cancel the query"). The final SIGKILL reaches every process.
	Mode string `json:"mode,omitempty"`
	// Exec is a command that asks the workload to stop (redis-cli
	// shutdown), run as a reload command is, before the signal: the
	// signal follows only if the run has not ended when it returns, and
	// Timeout covers both.
	Exec []string `json:"exec,omitempty"`
}

// Reload says how a workload takes a changed configuration without a
// restart: a signal to its main process (nginx: HUP), or a command run as
// its health checks are (in its network and cgroup, as its user).
type Reload struct {
	Signal string   `json:"signal,omitempty"`
	Exec   []string `json:"exec,omitempty"`
}

// Stop modes.
const (
	StopGroup = "group"
	StopMain  = "main"
)

// Resources are cgroup limits; a zero value means "no limit".
type Resources struct {
	MemoryMax Size   `json:"memory_max,omitempty"`
	CPUMax    string `json:"cpu_max,omitempty"`    // cores as a decimal, e.g. "0.5"
	CPUWeight int    `json:"cpu_weight,omitempty"` // 1..10000
	PidsMax   int    `json:"pids_max,omitempty"`
}

// Registry publishes the workload in the service registry.
type Registry struct {
	Name     string            `json:"name,omitempty"`
	Tags     []string          `json:"tags,omitempty"`
	Metadata map[string]string `json:"metadata,omitempty"`
	TTL      Duration          `json:"ttl,omitzero"` // default 30s
}

// PeerWorkspace is the workspace of the workloads a caller other than root
// applies while --peer-users confines callers: one of its own, so that it
// never claims root's modules or registry names.
func PeerWorkspace(uid uint32) string {
	return peerWorkspacePrefix + strconv.FormatUint(uint64(uid), 10)
}

// IsPeerWorkspace says whether a workspace is a confined caller's.
func IsPeerWorkspace(ws string) bool { return strings.HasPrefix(ws, peerWorkspacePrefix) }

const peerWorkspacePrefix = "uid-"
