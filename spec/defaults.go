package spec

import (
	"path/filepath"
	"time"
)

const (
	defaultMaxRestarts    = 5
	defaultWindow         = time.Minute
	defaultBackoffInitial = 250 * time.Millisecond
	defaultBackoffMax     = 30 * time.Second
	defaultStopSignal     = "SIGTERM"
	defaultStopTimeout    = 10 * time.Second
	defaultAPI            = "tcp"
	defaultInterval       = 2 * time.Second
	defaultHealthTimeout  = time.Second
	defaultLogTimeout     = time.Minute
	defaultFailures       = 3
	defaultHTTPPath       = "/"
	defaultHTTPExpect     = 200
	defaultRegistryTTL    = 30 * time.Second
	defaultNixShell       = "default"
)

// SetDefaults fills every unset field with its default. It is idempotent, and
// it also normalizes (empty lists and maps become nil, signal names become
// "SIGxxx") so that Equal can compare two workloads field by field.
func (w *Workload) SetDefaults() {
	if w.Kind == "" {
		w.Kind = KindNative
	}
	if w.Network == "" {
		w.Network = NetworkHost
	}
	w.Restart.setDefaults()
	w.Stop.setDefaults()
	if w.Forking != nil {
		w.Forking.setDefaults()
	}
	w.setWatchDefaults()
	for i := range w.Endpoints {
		// As codefly core: an endpoint named like an API serves it.
		if e := &w.Endpoints[i]; e.API == "" && apis[e.Name] && e.Name != "other" {
			e.API = e.Name
		}
		setDefault(&w.Endpoints[i].API, defaultAPI)
		if w.Endpoints[i].Port.Mode == "" {
			w.Endpoints[i].Port.Mode = PortHashed
		}
	}
	if w.Health != nil {
		w.Health.setDefaults()
	}
	if w.Registry != nil {
		setDefault(&w.Registry.TTL.Duration, defaultRegistryTTL)
		w.Registry.Tags = nilIfEmpty(w.Registry.Tags)
		w.Registry.Metadata = nilIfEmptyMap(w.Registry.Metadata)
	}
	if w.Nix != nil && w.Nix.Flake != "" && w.Nix.Package == "" {
		setDefault(&w.Nix.Shell, defaultNixShell)
	}
	w.Command = nilIfEmpty(w.Command)
	w.After = nilIfEmpty(w.After)
	w.Uses = nilIfEmpty(w.Uses)
	w.Endpoints = nilIfEmpty(w.Endpoints)
	w.Env = nilIfEmptyMap(w.Env)
	w.SecretEnv = nilIfEmptyMap(w.SecretEnv)
	if len(w.Configuration) == 0 {
		w.Configuration = nil
	}
	if len(w.SecretConfiguration) == 0 {
		w.SecretConfiguration = nil
	}
}

func (r *Restart) setDefaults() {
	setDefault(&r.Policy, RestartOnFailure)
	setDefault(&r.MaxRestarts, defaultMaxRestarts)
	setDefault(&r.Window.Duration, defaultWindow)
	setDefault(&r.Backoff.Initial.Duration, defaultBackoffInitial)
	// A long initial delay with the default cap would be invalid; the cap
	// follows instead, since the user only asked for slower restarts.
	setDefault(&r.Backoff.Max.Duration, max(defaultBackoffMax, r.Backoff.Initial.Duration))
}

func (s *Stop) setDefaults() {
	setDefault(&s.Signal, defaultStopSignal)
	if sig, err := ParseSignal(s.Signal); err == nil {
		s.Signal = signalName(sig)
	}
	setDefault(&s.Timeout.Duration, defaultStopTimeout)
	setDefault(&s.Mode, StopGroup)
	s.Exec = nilIfEmpty(s.Exec)
}

func (h *Health) setDefaults() {
	setDefault(&h.Interval.Duration, defaultInterval)
	if h.Log != "" {
		// A log check's timeout is the time a run has to print its line.
		setDefault(&h.Timeout.Duration, defaultLogTimeout)
	}
	setDefault(&h.Timeout.Duration, defaultHealthTimeout)
	setDefault(&h.Failures, defaultFailures)
	if h.HTTP != nil {
		setDefault(&h.HTTP.Path, defaultHTTPPath)
		setDefault(&h.HTTP.Expect, defaultHTTPExpect)
	}
	h.Exec = nilIfEmpty(h.Exec)
}

func setDefault[T comparable](field *T, value T) {
	var zero T
	if *field == zero {
		*field = value
	}
}

func nilIfEmpty[S ~[]E, E any](s S) S {
	if len(s) == 0 {
		return nil
	}
	return s
}

func nilIfEmptyMap[M ~map[K]V, K comparable, V any](m M) M {
	if len(m) == 0 {
		return nil
	}
	return m
}

// inDir resolves a host workload's workdir against dir, the directory of
// the spec file it was read from: dir when it says none, dir joined to a
// relative one. A container's workdir is a path in its image, and stays
// as it is (refused when relative); an empty dir changes nothing.
func (w *Workload) inDir(dir string) {
	if dir == "" {
		return
	}
	if rt := w.runtime(); rt.InContainer || rt.RunsNothing {
		return
	}
	switch {
	case w.Workdir == "":
		w.Workdir = dir
	case !filepath.IsAbs(w.Workdir):
		w.Workdir = filepath.Join(dir, w.Workdir)
	}
}
