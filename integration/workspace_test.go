package integration

import (
	"context"
	"strings"
	"testing"

	"github.com/flyd-dev/flyd/api"
	"github.com/flyd-dev/flyd/spec"
)

// TestWorkspaceConfigurations: a workspace document's configurations
// reach every workload of the workspace under codefly's names, secrets
// redacted wherever the document is shown; a project's workspace is its
// own, and goes with its down; the workloads directory refuses one,
// naming the file.
func TestWorkspaceConfigurations(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	stack := d.writeSpec(t, "stack.yaml", `kind: workspace
name: shop
configuration: {aws: {region: eu-west-1}, feature-flags: {new-cart: "true"}}
secret_configuration: {aws: {access-key: AKIAHIDDEN}}
---
name: app
identity: {workspace: shop, module: web, service: app}
command: ["@PROG@", "env"]
---
name: other
command: ["@PROG@", "env"]
`)
	out := d.mustCLI(t, "apply", "-f", stack)
	if !strings.Contains(out, "workspace shop: 2 configurations, 1 secret") {
		t.Errorf("apply said %q", out)
	}
	for _, want := range []string{"CODEFLY__WORKSPACE_CONFIGURATION__AWS__REGION=eu-west-1",
		"CODEFLY__WORKSPACE_CONFIGURATION__FEATURE_FLAGS__NEW_CART=true",
		"CODEFLY__WORKSPACE_SECRET_CONFIGURATION__AWS__ACCESS_KEY=AKIAHIDDEN"} {
		d.waitLog(t, "app", want)
	}
	d.waitState(t, "other", api.StateRunning)
	if logs := d.logs(t, "other"); strings.Contains(logs, "CODEFLY__WORKSPACE_") {
		t.Errorf("a workload of another workspace got shop's configurations:\n%s", logs)
	}
	if listed := d.mustCLI(t, "workspaces", "--json"); strings.Contains(listed, "AKIAHIDDEN") || !strings.Contains(listed, "eu-west-1") {
		t.Errorf("workspaces shows %s; want the secret redacted", listed)
	}

	// In a project: its own copy, gone with its down.
	d.mustCLI(t, "up", "-p", "wp", "-f", stack, "--wait")
	d.waitLog(t, "wp.app", "CODEFLY__WORKSPACE_CONFIGURATION__AWS__REGION=eu-west-1")
	if out := d.mustCLI(t, "down", "-p", "wp"); !strings.Contains(out, "workspace wp.shop removed") {
		t.Errorf("down said %q; want the project's workspace removed", out)
	}
	ws, err := api.DocumentsOf[spec.Workspace](context.Background(), d.client, spec.KindWorkspace)
	if err != nil || len(ws) != 1 || ws[0].Name != "shop" {
		t.Errorf("workspaces after the down: %+v, %v; want shop alone", ws, err)
	}
	d.mustCLI(t, "workspaces", "rm", "shop")
}
