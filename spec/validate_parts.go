package spec

import (
	"fmt"
	"net"
	"strconv"
	"strings"
)

// apis are codefly's APIs (core's standards: tcp, http, rest, grpc,
// connect) and flyd's "other".
var apis = map[string]bool{"tcp": true, "http": true, "rest": true, "grpc": true, "connect": true, "other": true}

// HTTPBased says whether an API is served over HTTP (http, rest, and
// connect, Connect RPC): its address is given as a URL, http://host:port,
// as codefly gives it.
func HTTPBased(api string) bool { return api == "http" || api == "rest" || api == "connect" }

func (w *Workload) validateEndpoints(p *problems) {
	names := make(map[string]int, len(w.Endpoints))
	ports := make(map[int]int, len(w.Endpoints))
	for i, e := range w.Endpoints {
		field := indexPath("endpoints", i)
		if j, dup := names[e.Name]; dup {
			p.add(joinPath(field, "name"), "%q is already the name of endpoints[%d]", e.Name, j)
		} else if !validName(e.Name) {
			p.add(joinPath(field, "name"), "must be %s", nameRule)
		}
		names[e.Name] = i
		if !apis[e.API] {
			p.add(joinPath(field, "api"), "must be tcp, http, rest, grpc, connect or other")
		}
		switch e.Port.Mode {
		case PortHashed, PortEphemeral:
		case PortFixed:
			if e.Port.Number < 1 || e.Port.Number > 65535 {
				p.add(joinPath(field, "port"), "must be between 1 and 65535, got %d", e.Port.Number)
			} else if j, dup := ports[e.Port.Number]; dup {
				p.add(joinPath(field, "port"), "%d is already the port of endpoints[%d]", e.Port.Number, j)
			}
			ports[e.Port.Number] = i
		default:
			p.add(joinPath(field, "port"), "must be hashed, ephemeral or a port number")
		}
		switch e.Publish.Mode {
		case "":
		case PortHashed, PortEphemeral, PortFixed:
			if w.Network == NetworkHost {
				p.add(joinPath(field, "publish"), "applies to an endpoint of an isolated network; a host-network endpoint is on the host already")
			} else if e.Publish.Mode == PortFixed && (e.Publish.Number < 1 || e.Publish.Number > 65535) {
				p.add(joinPath(field, "publish"), "must be between 1 and 65535, got %d", e.Publish.Number)
			}
		default:
			p.add(joinPath(field, "publish"), "must be hashed, ephemeral or a port number")
		}
		w.validateReach(p, field, e)
	}
}

// validateReach judges an endpoint's visibility and exposure by the
// endpoint model's named rules, in their order, and flyd's own for what
// a host can address.
func (w *Workload) validateReach(p *problems, field string, e Endpoint) {
	published := e.Publish.Mode != ""
	switch e.Location {
	case "", LocationNone:
		if e.Address != "" {
			p.add(joinPath(field, "address"), "is for a location: external endpoint; flyd allocates this one's port")
		}
	case LocationExternal:
		validateExternalEndpoint(p, field, w, e)
	default:
		p.add(joinPath(field, "location"), "must be external or none, not %q (location-known)", e.Location)
	}
	switch e.Visibility {
	case "", VisibilityNone, VisibilityPrivate, VisibilityInternal, VisibilityPublic:
	default:
		p.add(joinPath(field, "visibility"), "must be private, internal, public or none, not %q (visibility-known)", e.Visibility)
		return
	}
	switch e.Exposure {
	case "", ExposurePublic, ExposureNone:
	default:
		p.add(joinPath(field, "exposure"), "must be public or none, not %q (exposure-known)", e.Exposure)
		return
	}
	switch {
	case e.Visibility == VisibilityPublic && e.Exposure == "":
		p.add(joinPath(field, "exposure"), "a public endpoint states its exposure: public (addressed beyond the host) or none (exposure-declared)")
	case e.Exposure == ExposurePublic && e.Visibility != VisibilityPublic:
		p.add(joinPath(field, "exposure"), "public is only for a visibility: public endpoint; a %s one is not reached from beyond the host (exposure-within-reach)", e.Reach())
	case e.Exposed() && w.Network != NetworkHost && !published:
		p.add(joinPath(field, "exposure"), "public on an isolated network's endpoint needs publish: the host port it is addressed at (exposure-addressed)")
	case e.Visibility == VisibilityPublic && e.Exposure == ExposureNone && published:
		p.add(joinPath(field, "publish"), "an endpoint of exposure none is published nowhere; say exposure: public (exposure-unpublished)")
	case e.Visibility == VisibilityPrivate && published:
		p.add(joinPath(field, "publish"), "a private endpoint is for its own module; a published port is open to every process of the host (private-unpublished)")
	case e.Visibility == VisibilityPrivate && (w.Identity == nil || w.Identity.Module == ""):
		p.add(joinPath(field, "visibility"), "private needs identity.module: it is the module whose workloads may reach the endpoint (private-needs-module)")
	}
}

func (r *Restart) validate(p *problems) {
	switch r.Policy {
	case RestartNever, RestartOnFailure, RestartAlways:
	default:
		p.add("restart.policy", "must be %s, %s or %s", RestartNever, RestartOnFailure, RestartAlways)
	}
	if r.MaxRestarts < UnlimitedRestarts {
		p.add("restart.max_restarts", "must be -1 (unlimited) or a positive number")
	}
	positive(p, "restart.window", r.Window)
	atLeast(p, "restart.backoff.initial", r.Backoff.Initial, MinBackoff)
	if r.Backoff.Max.Duration < r.Backoff.Initial.Duration {
		p.add("restart.backoff.max", "must not be less than restart.backoff.initial (%s)", r.Backoff.Initial.Duration)
	}
}

func (s *Stop) validate(p *problems) {
	if _, err := ParseSignal(s.Signal); err != nil {
		p.add("stop.signal", "%v", err)
	}
	if s.Mode != StopGroup && s.Mode != StopMain {
		p.add("stop.mode", "must be %s or %s", StopGroup, StopMain)
	}
	if s.Timeout.Duration < 0 || s.Timeout.Duration > MaxStopTimeout {
		p.add("stop.timeout", "must be between 0 and %s, got %s", MaxStopTimeout, s.Timeout.Duration)
	}
	validateArgv(p, "stop.exec", s.Exec)
}

func (w *Workload) validateHealth(p *problems) {
	h := w.Health
	set := 0
	for _, ok := range []bool{h.TCP != "", h.HTTP != nil, len(h.Exec) > 0, h.Notify, h.Log != ""} {
		if ok {
			set++
		}
	}
	if set != 1 {
		p.add("health", "set exactly one of tcp, http, exec, notify or log")
	}
	if h.TCP != "" && !w.hasEndpoint(h.TCP) {
		p.add("health.tcp", "no endpoint is named %q", h.TCP)
	}
	for _, f := range [...]struct{ name, v string }{{"send", h.Send}, {"expect", h.Expect}} {
		switch {
		case f.v != "" && h.TCP == "":
			p.add("health."+f.name, "belongs to a tcp check")
		case len(f.v) > MaxTCPExchange:
			p.add("health."+f.name, "is %d bytes; at most %d", len(f.v), MaxTCPExchange)
		}
	}
	if h.Send != "" && h.Expect == "" {
		p.add("health.expect", "is needed with send: the reply is what the check judges")
	}
	if h.HTTP != nil {
		if !w.hasEndpoint(h.HTTP.Endpoint) {
			p.add("health.http.endpoint", "no endpoint is named %q", h.HTTP.Endpoint)
		}
		if !strings.HasPrefix(h.HTTP.Path, "/") {
			p.add("health.http.path", "must start with /")
		}
		if h.HTTP.Expect < 100 || h.HTTP.Expect > 599 {
			p.add("health.http.expect", "must be an HTTP status code, got %d", h.HTTP.Expect)
		}
	}
	if h.Notify && w.runtime().InContainer {
		p.add("health.notify", "applies to %s workloads: a container cannot reach the daemon's socket", outsideContainers())
	}
	h.validateLog(p)
	switch {
	case h.Watchdog.Duration != 0 && !h.Notify:
		p.add("health.watchdog", "needs notify: true: its keepalives come on the notify socket")
	case h.Watchdog.Duration != 0:
		atLeast(p, "health.watchdog", h.Watchdog, MinWatchdog)
	}
	validateArgv(p, "health.exec", h.Exec)
	atLeast(p, "health.interval", h.Interval, MinHealthInterval)
	positive(p, "health.timeout", h.Timeout)
	if h.Failures < 1 {
		p.add("health.failures", "must be at least 1")
	}
	if h.StartPeriod.Duration < 0 {
		p.add("health.start_period", "must not be negative")
	}
}

func (w *Workload) hasEndpoint(name string) bool {
	for _, e := range w.Endpoints {
		if e.Name == name {
			return true
		}
	}
	return false
}

// MinCPU and MaxCPU bound resources.cpu_max, in cores.
const (
	MinCPU = 0.01
	MaxCPU = 1e6
)

func (r *Resources) validate(p *problems) {
	if r.MemoryMax < 0 {
		p.add("resources.memory_max", "must not be negative")
	}
	if r.CPUMax != "" {
		// The kernel's bounds: a quota of at least 1 ms a period, and
		// no more cores than a machine has by far.
		cores, err := strconv.ParseFloat(r.CPUMax, 64)
		if err != nil || !(cores >= MinCPU && cores <= MaxCPU) { // also refuses NaN
			p.add("resources.cpu_max", "must be a number of cores from %v to %v, like \"0.5\" or \"2\"", MinCPU, MaxCPU)
		}
	}
	if r.CPUWeight < 0 || r.CPUWeight > 10000 {
		p.add("resources.cpu_weight", "must be between 1 and 10000")
	}
	if r.PidsMax < 0 {
		p.add("resources.pids_max", "must not be negative")
	}
}

func (r *Registry) validate(p *problems) {
	if r.TTL.Duration < 0 {
		p.add("registry.ttl", "must not be negative")
	}
	for i, tag := range r.Tags {
		if strings.TrimSpace(tag) == "" {
			p.add(indexPath("registry.tags", i), "must not be empty")
		}
	}
	if _, ok := r.Metadata[""]; ok {
		p.add("registry.metadata", "keys must not be empty")
	}
}

// validateExternalEndpoint checks an endpoint outside the system: it has
// an address and nothing flyd would allocate.
func validateExternalEndpoint(p *problems, field string, w *Workload, e Endpoint) {
	if !w.runtime().RunsNothing {
		p.add(joinPath(field, "location"), "external is for a workload of kind external, which runs nothing: a process flyd runs serves at a port flyd allocates")
	}
	if e.Port.Mode != PortHashed || e.Publish.Mode != "" {
		p.add(joinPath(field, "port"), "an external endpoint's port is its address's: set neither port nor publish")
	}
	if e.Exposed() {
		p.add(joinPath(field, "exposure"), "an external endpoint is not the system's to address (exposure-in-system)")
	}
	if _, err := ExternalAddress(e); err != nil {
		p.add(joinPath(field, "address"), "%v", err)
	}
}

// ExternalAddress is the address an external endpoint's consumers get, as
// codefly gives a DNS-resolved instance: host:port, or for an HTTP-based
// API a URL (http://, or https:// when its address says so).
func ExternalAddress(e Endpoint) (string, error) {
	addr := e.Address
	scheme, rest, isURL := strings.Cut(addr, "://")
	if isURL {
		if scheme != "http" && scheme != "https" {
			return "", fmt.Errorf("%q: a URL's scheme must be http or https", addr)
		}
		if !HTTPBased(e.API) {
			return "", fmt.Errorf("%q: a URL is for an HTTP-based API (http, rest, connect), and this endpoint's is %s: give host:port", addr, e.API)
		}
		addr = rest
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host == "" || strings.ContainsAny(host, "/ \t\n") {
		return "", fmt.Errorf("%q must be host:port (or a URL http[s]://host:port)", e.Address)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("%q: the port must be between 1 and 65535", e.Address)
	}
	switch {
	case isURL:
		return scheme + "://" + addr, nil
	case HTTPBased(e.API):
		return "http://" + addr, nil
	}
	return addr, nil
}
