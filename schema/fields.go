package schema

import (
	"reflect"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/flyd-dev/flyd/spec"
)

// required are the keys a type's mapping must have (beyond a document's
// kind), by Go type name: what validation refuses when left out.
var required = map[string][]string{
	"Workload":    {"name"},
	"Endpoint":    {"name"},
	"HTTPCheck":   {"endpoint"},
	"Watch":       {"path"},
	"Network":     {"name"},
	"Policy":      {"name", "select"},
	"IngressRule": {"from"},
	"EgressRule":  {"to"},
	"Workspace":   {"name"},
}

// extras are the fields whose schema says more than their Go type, by
// TYPE.KEY: the enums, patterns and bounds of validation.
var extras = map[string]func(g *generator, t reflect.Type) object{
	"Workload.name":       pattern(`^` + full + `$`),
	"Workload.project":    pattern(`^` + label + `$`),
	"Workload.network":    pattern(`^` + full + `$`),
	"Workload.env":        envMap,
	"Workload.secret_env": envMap,
	"Workload.profiles":   list(`^` + label + `$`),
	"Workload.after": list(`^` + full + `(:(` + spec.AfterStarted + `|` + spec.AfterHealthy + `)(\` + spec.AfterFollows + `)?|:` +
		spec.AfterCompleted + `|\` + spec.AfterFollows + `)?$`),
	"Workload.uses":     list(`^` + full + `(/` + label + `)?$`),
	"Workload.replicas": integer(0, spec.MaxReplicas),

	"Endpoint.name":       pattern(`^` + label + `$`),
	"Endpoint.api":        values("tcp", "http", "rest", "grpc", "connect", "other"),
	"Endpoint.visibility": values(spec.VisibilityPrivate, spec.VisibilityInternal, spec.VisibilityPublic, spec.VisibilityNone),
	"Endpoint.exposure":   values(spec.ExposurePublic, spec.ExposureNone),
	"Endpoint.location":   values(spec.LocationExternal, spec.LocationNone),

	"Restart.policy":       values(string(spec.RestartNever), string(spec.RestartOnFailure), string(spec.RestartAlways)),
	"Restart.max_restarts": integer(spec.UnlimitedRestarts, -1),
	"Stop.signal":          signal,
	"Stop.mode":            values(spec.StopGroup, spec.StopMain),
	"Reload.signal":        signal,
	"Health.failures":      integer(0, -1),
	"HTTPCheck.path":       pattern(`^(/|$)`),
	"HTTPCheck.expect": func(*generator, reflect.Type) object {
		return anyOf("", object{"type": "integer", "minimum": 0, "maximum": 599, "not": object{"minimum": 1, "maximum": 99}})
	},
	"Resources.cpu_weight": integer(0, 10000),
	"Resources.pids_max":   integer(0, -1),
	"Watch.action":         values(spec.WatchRestart, spec.WatchExec, spec.WatchSync),

	"Network.name":  docName,
	"Network.reach": values(spec.ReachOff, spec.ReachDeclared),

	"Policy.name":         pattern(`^` + full + `$`),
	"Selector.workloads":  names,
	"Selector.networks":   names,
	"Peers.workloads":     names,
	"Peers.networks":      names,
	"PolicyPort.port":     integer(0, 65535),
	"PolicyPort.protocol": values(spec.ProtocolTCP, spec.ProtocolUDP, spec.ProtocolICMP),

	"Workspace.name": pattern(`^` + full + `$`),
}

// Every document's project is a DNS label.
func init() {
	for _, k := range spec.DocKinds() {
		extras[reflect.TypeOf(k.New()).Elem().Name()+".project"] = pattern(`^` + label + `$`)
	}
}

func pattern(p string) func(*generator, reflect.Type) object {
	return func(*generator, reflect.Type) object { return patterned(p) }
}

func list(p string) func(*generator, reflect.Type) object {
	return func(*generator, reflect.Type) object { return object{"type": "array", "items": patterned(p)} }
}

func values(vs ...string) func(*generator, reflect.Type) object {
	return func(*generator, reflect.Type) object { return anyOf("", enum(vs...)) }
}

// integer is an integer from least to most; most -1 is no bound.
func integer(least, most int) func(*generator, reflect.Type) object {
	return func(*generator, reflect.Type) object {
		o := object{"type": "integer", "minimum": least}
		if most >= 0 {
			o["maximum"] = most
		}
		return anyOf("", o)
	}
}

// names are the names a policy selects or allows: full names, never
// "host".
func names(*generator, reflect.Type) object {
	return object{"type": "array", "items": object{"allOf": []any{patterned(`^` + full + `$`),
		object{"not": object{"const": spec.NetworkHost}}}}}
}

// docName is a network document's name: a full name other than "host".
func docName(*generator, reflect.Type) object {
	return object{"allOf": []any{patterned(`^` + full + `$`), object{"not": object{"const": spec.NetworkHost}}}}
}

func envMap(*generator, reflect.Type) object {
	return object{"type": "object", "propertyNames": object{"pattern": envKey}, "additionalProperties": scalarString()}
}

func signal(*generator, reflect.Type) object { return ref("Signal") }

// signalSchema is what spec.ParseSignal accepts: a signal's name, with
// or without SIG, in any case, or its number. The names are the system's
// that ParseSignal takes.
func signalSchema() object {
	var canonical, bare []string
	for n := 1; n < 65; n++ {
		name := unix.SignalName(syscall.Signal(n))
		if name == "" {
			continue
		}
		if sig, err := spec.ParseSignal(name); err != nil || sig != syscall.Signal(n) {
			continue
		}
		canonical = append(canonical, name)
		bare = append(bare, anyCase(strings.TrimPrefix(name, "SIG")))
	}
	return anyOf("A signal: its name (SIGTERM, TERM, term) or its number (1 to 64).",
		enum(canonical...),
		object{"type": "string", "pattern": `^(` + anyCase("SIG") + `)?(` + strings.Join(bare, "|") + `)$`},
		object{"type": "integer", "minimum": 1, "maximum": 64},
		object{"type": "string", "pattern": `^\+?0*([1-9]|[1-5][0-9]|6[0-4])$`})
}

// anyCase is a pattern matching s in any case: "[Hh][Uu][Pp]".
func anyCase(s string) string {
	var b strings.Builder
	for _, r := range s {
		lo, up := strings.ToLower(string(r)), strings.ToUpper(string(r))
		if lo == up {
			b.WriteRune(r)
			continue
		}
		b.WriteString("[" + up + lo + "]")
	}
	return b.String()
}
