package wiring

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/flyd-dev/flyd/carriers"
	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/internal/execenv"
	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/status"
)

// Plan is what one run of a workload is given of itself and the others:
// its command and its environment, inline or in file carriers. It is made
// at apply time too, so that whatever would fail at exec is refused
// synchronously.
type Plan struct {
	Args  []string
	Env   []string        // inline variables
	Files []carriers.File // values delivered by file
	// subst are the placeholders' values: ${PORT_…} and ${ADDR_…}.
	subst map[string]string
}

// PlaceholderPorts stands in for a spec's ports before they are assigned:
// as long as the longest real port, so that a plan's measurements hold.
func PlaceholderPorts(w *spec.Workload) []status.PortMapping {
	out := make([]status.PortMapping, len(w.Endpoints))
	for i, ep := range w.Endpoints {
		out[i] = status.PortMapping{Endpoint: ep.Name, API: ep.API, Port: 65535,
			Instances: []status.Instance{{Access: "native", Address: "localhost:65535"}}}
	}
	return out
}

var placeholder = regexp.MustCompile(`\$\{(PORT|ADDR)_([A-Z0-9_]+)\}`)

// PlanRun expands the command and builds the environment of a spec whose
// ports are assigned, for a runtime whose context (codefly's runtime
// context) is runtimeContext; used are what its workspace and its `uses`
// give it (Uses).
func PlanRun(w *spec.Workload, runtimeContext string, ports []status.PortMapping, used map[string]string) (*Plan, error) {
	id := w.Identified()
	own := map[string]string{
		"PATH":                     execenv.DefaultPath,
		"FLYD_WORKLOAD":            w.Name,
		"FLYD_NETWORK":             w.Network,
		"CODEFLY__RUNTIME_CONTEXT": runtimeContext,
		"CODEFLY__WORKSPACE":       id.Workspace,
		"CODEFLY__MODULE":          id.Module,
		"CODEFLY__SERVICE":         id.Service,
		// A host's run is codefly's local environment (the SDK's
		// IsLocal); the spec's env may say another.
		"CODEFLY__ENVIRONMENT": "local",
	}
	if id.Version != "" {
		own["CODEFLY__SERVICE_VERSION"] = id.Version
	}
	if w.Project != "" {
		// The project is codefly's naming scope: its hashed ports are
		// the project's own (netplane), and the service is told.
		own["FLYD_PROJECT"] = w.Project
		own["CODEFLY__NAMING_SCOPE"] = w.Project
	}
	for k, v := range used {
		own[k] = v
	}
	subst := map[string]string{}
	for _, p := range ports {
		key := spec.EnvName(p.Endpoint)
		own["FLYD_PORT_"+key] = strconv.Itoa(p.Port)
		// Its own endpoints under codefly's names, where it serves them,
		// as codefly gives a service its own (the SDK's own-endpoint query
		// and the generated templates listen there).
		self := "localhost:" + strconv.Itoa(p.Port)
		if spec.HTTPBased(p.API) {
			self = "http://" + self
		}
		own[spec.EndpointVar(id.Module, id.Service, p.Endpoint, p.API)] = self
		subst["PORT_"+key] = strconv.Itoa(p.Port)
		// Where the workload itself serves the endpoint, inside its
		// own network, whatever address others reach it on.
		subst["ADDR_"+key] = "localhost:" + strconv.Itoa(p.Port)
	}
	args, err := expandArgs("command", w.Command, subst)
	if err != nil {
		return nil, err
	}
	// Every command run for the workload takes the same placeholders:
	// one naming no endpoint is refused with the command's field.
	for _, c := range commandsOf(w) {
		if _, err := expandArgs(c.field, c.argv, subst); err != nil {
			return nil, err
		}
	}
	public, secret := Configurations(w)
	env, files := carriers.Build(public, own, w.Env, secret, w.SecretEnv)
	return &Plan{Args: args, Env: env, Files: files, subst: subst}, nil
}

// command is one of the commands a spec has run beside its run.
type command struct {
	field string
	argv  []string
}

// commandsOf are the commands a spec has run beside its run, by field.
func commandsOf(w *spec.Workload) []command {
	out := []command{{"stop.exec", w.Stop.Exec}}
	if w.Reload != nil {
		out = append(out, command{"reload.exec", w.Reload.Exec})
	}
	if w.Health != nil {
		out = append(out, command{"health.exec", w.Health.Exec})
	}
	for i, e := range w.Watch {
		out = append(out, command{fmt.Sprintf("watch[%d].exec", i), e.Exec})
	}
	return out
}

// Expand gives argv, a command run beside the run (field names it: an exec
// check, a reload's, a stop's, a watch's), the placeholders its command
// takes: ${PORT_ENDPOINT} and ${ADDR_ENDPOINT}.
func (p *Plan) Expand(field string, argv []string) ([]string, error) {
	return expandArgs(field, argv, p.subst)
}

// expandArgs puts the values of subst in argv's placeholders; one naming
// no endpoint is an error at field's index.
func expandArgs(field string, argv []string, subst map[string]string) ([]string, error) {
	args := make([]string, len(argv))
	for i, a := range argv {
		var missing string
		args[i] = placeholder.ReplaceAllStringFunc(a, func(m string) string {
			if v, ok := subst[m[2:len(m)-1]]; ok {
				return v
			}
			missing = m
			return m
		})
		if missing != "" {
			return nil, &spec.FieldError{Field: fmt.Sprintf("%s[%d]", field, i),
				Msg: missing + " names no endpoint of this workload"}
		}
	}
	return args, nil
}

// Check refuses at apply time what exec would refuse, measuring the
// environment with carrier paths (under carrierDir) as long as the real
// ones will be. The driver checks again with the program's resolved path.
func (p *Plan) Check(carrierDir string) error {
	if len(p.Args) == 0 {
		return nil
	}
	env := append(p.Env[:len(p.Env):len(p.Env)], carriers.Pointers(carrierDir, p.Files)...)
	return carriers.CheckExec(p.Args[0], p.Args, env, carriers.StackLimit())
}

// CommandEnv is the environment of a command run beside the run (an exec
// check, a reload, a watch's command): the inline variables, and those
// by file through the run's own carrier files in carrierDir, never
// dropped. Values by file cannot reach a command without a run's carrier
// directory: an error (errdefs.ErrConflict) naming them.
func (p *Plan) CommandEnv(carrierDir string) ([]string, error) {
	if len(p.Files) == 0 {
		return p.Env, nil
	}
	if carrierDir == "" {
		keys := make([]string, len(p.Files))
		for i, f := range p.Files {
			keys[i] = f.Key
		}
		return nil, fmt.Errorf("%w: %s of the workload go by file, and its run has no files a command could be given", errdefs.ErrConflict, strings.Join(keys, ", "))
	}
	return append(p.Env[:len(p.Env):len(p.Env)], carriers.Pointers(carrierDir, p.Files)...), nil
}
