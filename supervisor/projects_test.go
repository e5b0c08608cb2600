package supervisor

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/status"
)

// TestUpAndDown: up makes a project what its documents say and removes
// what they no longer hold; names resolve within the project; another
// project of the same names is untouched; down removes all of one, and a
// project with nothing is not found.
func TestUpAndDown(t *testing.T) {
	d := newFakeDriver()
	s := openFake(t, d)
	defer s.Close()
	ctx := context.Background()
	docs := func(names ...string) Documents {
		var out Documents
		for _, n := range names {
			w := fakeSpec(n, "run")
			if n == "app" {
				w.After = []string{"db:started"}
			}
			out.Workloads = append(out.Workloads, w)
		}
		out.Workspaces = []*spec.Workspace{{Kind: spec.KindWorkspace, Name: "default", Configuration: spec.Configurations{"c": {"k": "v"}}}}
		return out
	}
	for _, p := range []string{"p1", "p2"} {
		ch, err := s.Up(ctx, p, docs("db", "app", "old"), ApplyOptions{Start: true})
		if err != nil || len(ch.Applied) != 3 {
			t.Fatalf("up %s: %+v, %v", p, ch, err)
		}
		for _, o := range ch.Applied {
			if o.Err != nil || !strings.HasPrefix(o.Name, p+".") {
				t.Errorf("up %s applied %s: %v", p, o.Name, o.Err)
			}
		}
		waitState(t, s, p+".app", status.Running)
	}
	if w, _ := s.Get(ctx, "p1.app"); w.Spec.After[0] != "p1.db:started" {
		t.Errorf("p1.app waits for %v; want its own project's db", w.Spec.After)
	}
	if vars := s.workspaceVars(s.mustSpec(t, "p1.app")); vars["CODEFLY__WORKSPACE_CONFIGURATION__C__K"] != "v" {
		t.Errorf("p1.app's workspace configuration: %v", vars)
	}

	ch, err := s.Up(ctx, "p1", docs("db", "app"), ApplyOptions{Start: true})
	if err != nil || len(ch.Removed) != 1 || ch.Removed[0].Name != "p1.old" {
		t.Fatalf("up without old: %+v, %v; want p1.old removed", ch, err)
	}
	if _, err := s.Get(ctx, "p2.old"); err != nil {
		t.Errorf("p2.old went with p1's: %v", err)
	}
	// One its files define but its profiles leave out is kept as it is.
	kept := docs("db", "app")
	kept.Keep = []string{"old"}
	if ch, err := s.Up(ctx, "p2", kept, ApplyOptions{Start: true}); err != nil || len(ch.Removed) != 0 {
		t.Errorf("up of p2 keeping old: %+v, %v; want nothing removed", ch, err)
	}

	other := fakeSpec("x", "run")
	other.Project = "p3"
	if _, err := s.Up(ctx, "p1", Documents{Workloads: []*spec.Workload{other}}, ApplyOptions{}); !errors.Is(err, errdefs.ErrInvalid) {
		t.Errorf("up of a document of another project: %v; want refused", err)
	}
	if _, err := s.Up(ctx, "Not_A_Label", docs("db"), ApplyOptions{}); !errors.Is(err, errdefs.ErrInvalid) {
		t.Errorf("up of a project not a DNS label: %v", err)
	}

	ch, err = s.Down(ctx, "p1", RemoveOptions{})
	if err != nil || len(ch.Removed) != 2 || len(ch.Workspaces) != 1 {
		t.Fatalf("down p1: %+v, %v", ch, err)
	}
	for _, w := range s.List(ctx) {
		if spec.ProjectOf(w.Name) == "p1" {
			t.Errorf("%s is left after down", w.Name)
		}
	}
	if _, err := s.Down(ctx, "p1", RemoveOptions{}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("a second down: %v; want not found", err)
	}
	if n := len(s.Workspaces(ctx)); n != 1 {
		t.Errorf("%d workspaces left; want p2's", n)
	}
}

// mustSpec is a workload's spec, secrets included.
func (s *Supervisor) mustSpec(t *testing.T, name string) *spec.Workload {
	t.Helper()
	w, err := s.lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	return w.specNow()
}
