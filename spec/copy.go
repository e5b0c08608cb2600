package spec

import (
	"maps"
	"reflect"
	"slices"
)

// RedactedValue replaces every secret_env value in Redacted copies.
const RedactedValue = "<redacted>"

// Clone returns a deep copy: nothing in it is shared with w.
func (w *Workload) Clone() *Workload {
	if w == nil {
		return nil
	}
	c := *w
	c.Identity = clonePtr(w.Identity)
	c.Command = slices.Clone(w.Command)
	c.Env = maps.Clone(w.Env)
	c.SecretEnv = maps.Clone(w.SecretEnv)
	c.EnvFile = slices.Clone(w.EnvFile)
	c.Profiles = slices.Clone(w.Profiles)
	c.Configuration = w.Configuration.clone()
	c.SecretConfiguration = w.SecretConfiguration.clone()
	c.Endpoints = slices.Clone(w.Endpoints)
	c.After = slices.Clone(w.After)
	c.Uses = slices.Clone(w.Uses)
	if w.Reload != nil {
		r := *w.Reload
		r.Exec = slices.Clone(w.Reload.Exec)
		c.Reload = &r
	}
	c.Stop.Exec = slices.Clone(w.Stop.Exec)
	c.Forking = clonePtr(w.Forking)
	c.Watch = cloneWatch(w.Watch)
	c.Resources = clonePtr(w.Resources)
	c.Nix = clonePtr(w.Nix)
	c.Containerd = clonePtr(w.Containerd)
	if c.Containerd != nil {
		c.Containerd.Volumes = slices.Clone(w.Containerd.Volumes)
	}
	if w.Health != nil {
		h := *w.Health
		h.HTTP = clonePtr(w.Health.HTTP)
		h.Exec = slices.Clone(w.Health.Exec)
		c.Health = &h
	}
	if w.Registry != nil {
		r := *w.Registry
		r.Tags = slices.Clone(w.Registry.Tags)
		r.Metadata = maps.Clone(w.Registry.Metadata)
		c.Registry = &r
	}
	return &c
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	c := *p
	return &c
}

// Redacted returns a spec safe to log or return from the API: a deep copy
// in which secret values are replaced, keys kept so users can see what is
// set; or, when w has no secret, w itself. Specs are not changed once
// made, so sharing w costs nothing but saves a copy per workload.
func (w *Workload) Redacted() *Workload {
	if w == nil || len(w.SecretEnv) == 0 && len(w.SecretConfiguration) == 0 {
		return w
	}
	c := w.Clone()
	if c != nil {
		for k := range c.SecretEnv {
			c.SecretEnv[k] = RedactedValue
		}
		for _, kv := range c.SecretConfiguration {
			for k := range kv {
				kv[k] = RedactedValue
			}
		}
	}
	return c
}

// Equal reports whether a and b describe the same workload once defaults are
// applied, so that applying an unchanged spec can be a no-op.
func Equal(a, b *Workload) bool {
	if a == nil || b == nil {
		return a == b
	}
	a, b = a.Clone(), b.Clone()
	a.SetDefaults()
	b.SetDefaults()
	return reflect.DeepEqual(a, b)
}
