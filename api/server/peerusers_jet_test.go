package server

import (
	"errors"
	"strings"
	"testing"

	"github.com/flyd-dev/flyd/api"
	"github.com/flyd-dev/flyd/spec"
)

// TestPeerJetDomain: a caller other than root opts no instance into the
// edge's routing, however it spells jet.domain (case, white space, a
// zero-width character, in metadata or a tag); root does, and a peer's
// labels that only look alike pass.
func TestPeerJetDomain(t *testing.T) {
	policy, err := PeerUsersPolicy("nobody")
	if err != nil {
		t.Fatal(err)
	}
	w := func(r spec.Registry) *spec.Workload {
		return &spec.Workload{Name: "w", Kind: spec.KindNative, Command: []string{"/bin/true"}, User: "nobody", Registry: &r}
	}
	peer := Peer{UID: 65534, GID: 65534}
	for _, tt := range []struct {
		name  string
		r     spec.Registry
		field string
	}{
		{"metadata", spec.Registry{Metadata: map[string]string{"jet.domain": "x.example"}}, `registry.metadata["jet.domain"]`},
		{"metadata in capitals", spec.Registry{Metadata: map[string]string{"Jet.Domain": "x.example"}}, `registry.metadata["Jet.Domain"]`},
		{"metadata with a space", spec.Registry{Metadata: map[string]string{"jet.domain ": "x.example"}}, `registry.metadata["jet.domain "]`},
		{"metadata with a zero-width space", spec.Registry{Metadata: map[string]string{"jet.\u200bdomain": "x.example"}}, "registry.metadata"},
		{"tag", spec.Registry{Tags: []string{"team=a", "jet.domain=x.example"}}, "registry.tags[1]"},
		{"tag in capitals", spec.Registry{Tags: []string{"JET.DOMAIN=x.example"}}, "registry.tags[0]"},
		{"tag with spaces", spec.Registry{Tags: []string{" jet.domain =x.example"}}, "registry.tags[0]"},
		{"tag without a value", spec.Registry{Tags: []string{"JET.DOMAIN="}}, "registry.tags[0]"},
		{"tag without =", spec.Registry{Tags: []string{"Jet.Domain"}}, "registry.tags[0]"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := policy(peer, w(tt.r))
			var e *api.Error
			if !errors.As(err, &e) || e.Code != "forbidden" || !strings.HasPrefix(e.Field, tt.field) || !strings.Contains(e.Message, "jet.domain") {
				t.Fatalf("%v; want forbidden, field %s", err, tt.field)
			}
			if err := policy(Peer{UID: 0}, w(tt.r)); err != nil {
				t.Fatalf("root's: %v", err)
			}
		})
	}
	for _, r := range []spec.Registry{
		{Metadata: map[string]string{"jet.domains": "x", "my.jet.domain": "x"}, Tags: []string{"domain=jet", "jet=domain"}},
		{Tags: []string{"note=jet.domain=x"}},
	} {
		if err := policy(peer, w(r)); err != nil {
			t.Errorf("a peer's %+v: %v", r, err)
		}
	}
}
