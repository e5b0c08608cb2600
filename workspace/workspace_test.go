package workspace

import (
	"context"
	"errors"
	"testing"

	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/records"
	"github.com/flyd-dev/flyd/spec"
)

// TestWorkspaces: a put document is in force under its full name and
// found again after reopening; a workload gets the configurations of its
// identity's workspace in its own project, secret ones under their own
// names, and nothing of another project's; a delete holds, and a second is
// not found.
func TestWorkspaces(t *testing.T) {
	ctx := context.Background()
	stateDir, runDir := t.TempDir(), t.TempDir()
	st, err := records.Open(stateDir, runDir, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	set := Open(st, zap.NewNop())
	for _, ws := range []*spec.Workspace{
		{Kind: spec.KindWorkspace, Name: "default", Project: "ci-7",
			Configuration: spec.Configurations{"db": {"host": "pg"}}, SecretConfiguration: spec.Configurations{"db": {"password": "s3cret"}}},
		{Kind: spec.KindWorkspace, Name: "staging", Configuration: spec.Configurations{"db": {"host": "pg-staging"}}},
	} {
		if _, err := set.Put(ctx, ws); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := set.Put(ctx, &spec.Workspace{Kind: spec.KindWorkspace, Name: "Not A Name"}); err == nil {
		t.Error("an invalid document was put")
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	reopen := func() *Set {
		t.Helper()
		if st, err = records.Open(stateDir, runDir, zap.NewNop()); err != nil {
			t.Fatal(err)
		}
		return Open(st, zap.NewNop())
	}
	set = reopen()
	list := listed(t, set)
	if len(list) != 2 || list[0].Name != "ci-7.default" || list[1].Name != "staging" {
		t.Fatalf("workspaces after reopening: %+v", list)
	}
	if v := list[0].SecretConfiguration["db"]["password"]; v == "s3cret" {
		t.Error("a listed secret is not redacted")
	}
	tests := []struct {
		name     string
		workload *spec.Workload
		want     map[string]string
	}{
		{"its project's default", &spec.Workload{Name: "ci-7.api"}, map[string]string{
			"CODEFLY__WORKSPACE_CONFIGURATION__DB__HOST":            "pg",
			"CODEFLY__WORKSPACE_SECRET_CONFIGURATION__DB__PASSWORD": "s3cret",
		}},
		{"another project's default is not its", &spec.Workload{Name: "api"}, nil},
		{"a workspace its identity names", &spec.Workload{Name: "api", Identity: &spec.Identity{Workspace: "staging"}},
			map[string]string{"CODEFLY__WORKSPACE_CONFIGURATION__DB__HOST": "pg-staging"}},
	}
	for _, tt := range tests {
		got := set.Vars(tt.workload)
		if len(got) != len(tt.want) {
			t.Errorf("%s: %v; want %v", tt.name, got, tt.want)
			continue
		}
		for k, v := range tt.want {
			if got[k] != v {
				t.Errorf("%s: %s=%q; want %q", tt.name, k, got[k], v)
			}
		}
	}
	if err := set.Delete(ctx, "staging"); err != nil {
		t.Fatal(err)
	}
	if err := set.Delete(ctx, "staging"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("a second delete: %v; want not found", err)
	}
	st.Close()
	if len(listed(t, reopen())) != 1 {
		t.Error("the delete is not recorded")
	}
	st.Close()
}

// listed is the set's list as the API shows it.
func listed(t *testing.T, set *Set) []spec.Workspace {
	t.Helper()
	v, err := set.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return v.([]spec.Workspace)
}
