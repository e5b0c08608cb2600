package wiring

import (
	"fmt"
	"maps"

	"github.com/flyd-dev/flyd/authz"
	"github.com/flyd-dev/flyd/netplane"
	"github.com/flyd-dev/flyd/spec"
)

// Configurations are w's configurations under codefly's names: its own,
// and, for a consumer, what it is given of each workload it uses.
func Configurations(w *spec.Workload) (public, secret map[string]string) {
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

// Uses is what a consumer that the caller of uid by applied is given of
// the workloads its `uses` name: the variables that carry each used
// endpoint's value, from where the consumer runs, and the producers'
// configurations (seed 000's configuration flow: a database's connection
// reaches its consumers). With placeholder set, used endpoints get a
// value as long as any real one, for the measurements at apply; a
// producer that is missing, or an endpoint it does not have, is an error
// naming the entry.
//
// A name resolves within its owner's reach (Owned): root's consumers use
// root's workloads alone, a peer's its own and root's. A producer's
// secret configuration reaches a consumer another caller applied only
// where its owner said so: root, by a policy that opens the producer to
// peers (`from: {users: true, peers: true}`, the rule that opens its
// endpoints to their `uses`); otherwise it is left out, and the consumer
// is given the rest.
func Uses(c *spec.Workload, by uint32, world World, placeholder bool) (map[string]string, error) {
	out := map[string]string{}
	for i, entry := range c.Uses {
		name, only := spec.ParseUse(entry)
		field := fmt.Sprintf("uses[%d]", i)
		v, ok := world.Lookup(name)
		if !ok {
			return nil, &spec.FieldError{Field: field, Msg: fmt.Sprintf("%q names no workload (apply it first)", name)}
		}
		if err := Owned(name, v.AppliedBy, by); err != nil {
			return nil, &authz.Refusal{Field: field, Msg: err.Error()}
		}
		id := v.Spec.Identified()
		public, secret := Configurations(v.Spec)
		maps.Copy(out, public)
		if v.AppliedBy == by || by == 0 || world.OpenToPeers(name, v.Spec.Network) != "" {
			maps.Copy(out, secret)
		}
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
				var err error
				if addr, err = world.Address(c, v.Spec, p); err != nil {
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

// Owned refuses a name of a workload that owner applied, resolved for a
// document that by applied, when it is not by's to resolve to: root's
// names are root's alone, and a caller other than root's are its own or
// root's. Without it, a caller other than root could take a name before
// root (or another caller) first applies it, or once it is removed, and
// be what the other's `uses` resolve to.
func Owned(name string, owner, by uint32) error {
	switch {
	case owner == by || owner == 0:
		return nil
	case by == 0:
		return fmt.Errorf("%s is a workload of uid %d: root's documents name root's workloads alone", name, owner)
	}
	return fmt.Errorf("%s is a workload of uid %d: a caller other than root names its own workloads and root's", name, owner)
}
