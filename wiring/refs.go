package wiring

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/flyd-dev/flyd/netplane"
	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/status"
)

// refPattern is an endpoint reference in a value:
// ${endpoint:MODULE/SERVICE/TOKEN[::API][|authority]}.
var refPattern = regexp.MustCompile(`\$\{endpoint:([^}]*)\}`)

// References is the spec with every endpoint reference of its command,
// env and secret_env replaced by the value it names, from where the
// workload runs (World.Address). With placeholder set, references are checked
// (their producer exists, their endpoint is chosen) and replaced by an
// address as long as any real one, for the measurements at apply. Errors
// name the key, never the value.
func References(w *spec.Workload, world World, placeholder bool) (*spec.Workload, error) {
	if !strings.Contains(strings.Join(w.Command, "\x00")+envText(w.Env)+envText(w.SecretEnv), "${endpoint:") {
		return w, nil
	}
	c := w.Clone()
	expand := func(field, v string) (string, error) {
		var ferr error
		out := refPattern.ReplaceAllStringFunc(v, func(m string) string {
			if ferr != nil {
				return m
			}
			addr, err := resolveRef(w, world, refPattern.FindStringSubmatch(m)[1], placeholder)
			if err != nil {
				ferr = &spec.FieldError{Field: field, Msg: err.Error()}
				return m
			}
			return addr
		})
		return out, ferr
	}
	var err error
	for i, a := range c.Command {
		if c.Command[i], err = expand(fmt.Sprintf("command[%d]", i), a); err != nil {
			return nil, err
		}
	}
	for _, env := range []struct {
		field string
		m     map[string]string
	}{{"env", c.Env}, {"secret_env", c.SecretEnv}} {
		keys := make([]string, 0, len(env.m))
		for k := range env.m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if env.m[k], err = expand(env.field+"."+k, env.m[k]); err != nil {
				return nil, err
			}
		}
	}
	return c, nil
}

func envText(m map[string]string) string {
	var b strings.Builder
	for _, v := range m {
		b.WriteString(v)
	}
	return b.String()
}

// resolveRef resolves one reference by the seed's rule: the producer is
// the workload whose identity has the module and service, in the
// consumer's workspace or else in another; its endpoint
// whose name is the token wins; else the token is an API, and exactly one
// endpoint serving it is the answer. "::API" requires the chosen endpoint
// to serve API; "|authority" asks for host:port where an http or rest
// endpoint is otherwise given as a URL.
func resolveRef(consumer *spec.Workload, world World, ref string, placeholder bool) (string, error) {
	body, authority := strings.CutSuffix(ref, "|authority")
	body, wantAPI, qualified := strings.Cut(body, "::")
	parts := strings.Split(body, "/")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return "", fmt.Errorf("an endpoint reference must be ${endpoint:MODULE/SERVICE/ENDPOINT[::API][|authority]}")
	}
	module, service, token := parts[0], parts[1], parts[2]
	// The consumer's own workspace first; then the others, but for the
	// workspaces of callers other than root ("uid-N"), which can never
	// take, nor make ambiguous, a reference of someone else's.
	own := consumer.Identified().Workspace
	var producer *spec.Workload
	var ports []status.PortMapping
	for _, sameWorkspace := range []bool{true, false} {
		for _, v := range world.All() {
			id := v.Spec.Identified()
			// Within the consumer's project only: its copies elsewhere
			// are other stacks.
			if spec.ProjectOf(v.Spec.Name) != spec.ProjectOf(consumer.Name) ||
				id.Module != module || id.Service != service || (id.Workspace == own) != sameWorkspace ||
				!sameWorkspace && spec.IsPeerWorkspace(id.Workspace) {
				continue
			}
			if producer != nil {
				return "", fmt.Errorf("%s/%s is the identity of both %s and %s", module, service, producer.Name, v.Spec.Name)
			}
			producer, ports = v.Spec, v.Ports
		}
		if producer != nil {
			break
		}
	}
	if producer == nil {
		return "", fmt.Errorf("no workload is %s/%s (identity module/service)", module, service)
	}
	chosen := -1
	for i, p := range ports {
		if p.Endpoint == token {
			chosen = i
		}
	}
	if chosen < 0 {
		var serving []string
		// Among the endpoints the consumer may reach (seed 000): a
		// private one of another module is no candidate.
		for i, p := range ports {
			if p.API == token && netplane.Permitted(consumer, producer, p.Endpoint) == nil {
				chosen = i
				serving = append(serving, p.Endpoint)
			}
		}
		switch {
		case len(serving) > 1:
			return "", fmt.Errorf("%s/%s has %d endpoints serving %s (%s): name the one you mean", module, service, len(serving), token, strings.Join(serving, ", "))
		case chosen < 0:
			return "", fmt.Errorf("%s/%s has no endpoint named %s, nor one serving it", module, service, token)
		}
	}
	p := ports[chosen]
	if qualified && p.API != wantAPI {
		return "", fmt.Errorf("endpoint %s of %s/%s serves %s, not %s", p.Endpoint, module, service, p.API, wantAPI)
	}
	if err := netplane.Permitted(consumer, producer, p.Endpoint); err != nil {
		return "", err
	}
	addr := netplane.Placeholder(p)
	if !placeholder || p.Location == spec.LocationExternal {
		var err error
		if addr, err = world.Address(consumer, producer, p); err != nil {
			return "", err
		}
	}
	if authority {
		return netplane.Authority(addr), nil
	}
	return addr, nil
}
