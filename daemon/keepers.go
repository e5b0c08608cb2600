package daemon

import (
	"github.com/flyd-dev/flyd/documents"
	"github.com/flyd-dev/flyd/netplane"
	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/workspace"
)

// Keepers is the part of the daemon that puts each kind of document beside
// workloads (spec.DocKinds) in force: a new kind is registered here, one
// line, once its keeper exists. hostsOf names a network's /etc/hosts
// while one of its runs has it (nil: none is named).
func Keepers(plane *netplane.Plane, workspaces *workspace.Set, hostsOf func(network string) string) map[string]documents.Keeper {
	return map[string]documents.Keeper{
		spec.KindNetwork:   documents.Networks(plane, hostsOf),
		spec.KindPolicy:    documents.Policies(plane),
		spec.KindWorkspace: workspaces,
	}
}
