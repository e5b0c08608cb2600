package compose

import (
	"bytes"
	"maps"
	"slices"

	"github.com/compose-spec/compose-go/v2/types"

	"github.com/flyd-dev/flyd/spec"
)

// AllProfiles, among the profiles asked for, selects every service.
const AllProfiles = "*"

// ModelYAML is the project as compose resolved it, written as YAML as
// `docker compose config` writes it: interpolated, merged, paths made
// absolute, the services of the profiles asked for (those without
// profiles always; "*" every one). Every '$' is written '$$', as compose
// writes it, so that compose reads the output back to the same project.
// The values of an x-flyd secret_env and secret_configuration are
// redacted, as flyd's config redacts a workload's secrets.
func (p *Project) ModelYAML(profiles []string) ([]byte, error) {
	m := p.Model
	if !slices.Contains(profiles, AllProfiles) {
		var err error
		if m, err = m.WithProfiles(profiles); err != nil {
			return nil, err
		}
	}
	out, err := redactModel(m).MarshalYAML()
	if err != nil {
		return nil, err
	}
	return bytes.ReplaceAll(out, []byte("$"), []byte("$$")), nil
}

// redactModel is m with the values of every x-flyd secret_env and
// secret_configuration replaced; m itself is left as it is.
func redactModel(m *types.Project) *types.Project {
	out := *m
	out.Services = types.Services{}
	for name, svc := range m.Services {
		if ext, ok := svc.Extensions[Extension].(map[string]any); ok {
			red := maps.Clone(ext)
			for _, k := range []string{"secret_env", "secret_configuration"} {
				if v, ok := ext[k]; ok {
					red[k] = redactLeaves(v)
				}
			}
			svc.Extensions = maps.Clone(svc.Extensions)
			svc.Extensions[Extension] = red
		}
		out.Services[name] = svc
	}
	return &out
}

// redactLeaves is v with every value that is not a mapping replaced.
func redactLeaves(v any) any {
	mv, ok := v.(map[string]any)
	if !ok {
		return spec.RedactedValue
	}
	out := make(map[string]any, len(mv))
	for _, k := range slices.Sorted(maps.Keys(mv)) {
		out[k] = redactLeaves(mv[k])
	}
	return out
}
