package supervisor

import (
	"fmt"
	"maps"

	"github.com/flyd-dev/flyd/netplane"
	"github.com/flyd-dev/flyd/spec"
)

// configurationVars are w's configurations under codefly's names: its own,
// and, for a consumer, what it is given of each workload it uses.
func configurationVars(w *spec.Workload) (public, secret map[string]string) {
	id := w.Identified()
	public, secret = map[string]string{}, map[string]string{}
	for name, kv := range w.Configuration {
		for k, v := range kv {
			public[spec.ConfigurationVar(id.Module, id.Service, name, k, false)] = v
		}
	}
	for name, kv := range w.SecretConfiguration {
		for k, v := range kv {
			secret[spec.ConfigurationVar(id.Module, id.Service, name, k, true)] = v
		}
	}
	return public, secret
}

// usedEndpoints is what a workload is given of the others: its workspace
// document's configurations, and, for its `uses`, the variables that carry
// each used endpoint's address, the one that reaches it from where the
// consumer runs, and the producers' configurations. With placeholder set, used endpoints get an address as
// long as any real one, for the measurements at apply; a producer that is
// missing, or an endpoint it does not have, is an error naming the entry.
func (s *Supervisor) usedEndpoints(c *spec.Workload, placeholder bool) (map[string]string, error) {
	// Its workspace's configurations come first: a producer's own of the
	// same name is the more specific.
	out := map[string]string{}
	maps.Copy(out, s.workspaceVars(c))
	for i, entry := range c.Uses {
		name, only := spec.ParseUse(entry)
		field := fmt.Sprintf("uses[%d]", i)
		w, err := s.lookup(name)
		if err != nil {
			return nil, &spec.FieldError{Field: field, Msg: fmt.Sprintf("%q names no workload (apply it first)", name)}
		}
		v := w.snapshot(true)
		id := v.Spec.Identified()
		// A producer's configurations reach its consumers (seed 000's
		// configuration flow: a database's connection, say), from its
		// own spec: the snapshot's has its secrets redacted.
		public, secret := configurationVars(w.specNow())
		maps.Copy(out, public)
		maps.Copy(out, secret)
		found := false
		for _, p := range v.Ports {
			if only != "" && p.Endpoint != only {
				continue
			}
			found = true
			// Seed 000: a use that names no endpoint consumes those it is
			// permitted and drops the rest; one that names an endpoint it
			// may not reach is refused, at apply.
			if err := netplane.Permitted(c, v.Spec, p.Endpoint); err != nil {
				if only == "" {
					continue
				}
				return nil, &spec.FieldError{Field: field, Msg: err.Error()}
			}
			addr := netplane.Placeholder(p)
			// An external address is known at apply: judged there.
			if !placeholder || p.Location == spec.LocationExternal {
				if addr, err = s.net.Address(c, v.Spec, p); err != nil {
					return nil, &spec.FieldError{Field: field, Msg: err.Error()}
				}
			}
			out[spec.EndpointVar(id.Module, id.Service, p.Endpoint, p.API)] = addr
		}
		if only != "" && !found {
			return nil, &spec.FieldError{Field: field, Msg: fmt.Sprintf("workload %s has no endpoint %q", name, only)}
		}
	}
	return out, nil
}
