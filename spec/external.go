package spec

// KindExternal runs nothing: it stands for a service outside the host (a
// managed database, a SaaS API) whose endpoints are all location:
// external, at the addresses the spec gives.
const KindExternal Kind = "external"

func init() {
	registerRuntime(Runtime{Kind: KindExternal, Rank: 40, RunsNothing: true, Validate: validateExternal})
}

// validateExternal checks a workload of kind external: it runs nothing,
// so it has nothing to run, limit, reload or check, and every endpoint
// of it is external.
func validateExternal(w *Workload, p *problems) {
	if len(w.Command) > 0 {
		p.add("command", "kind external runs nothing")
	}
	if w.Network != NetworkHost {
		p.add("network", "kind external runs nothing in a network: its endpoints are where their addresses say")
	}
	for _, f := range []struct {
		set  bool
		name string
	}{{w.Health != nil, "health"}, {w.Resources != nil, "resources"}, {w.Reload != nil, "reload"}, {w.Workdir != "", "workdir"},
		{len(w.Stop.Exec) > 0, "stop.exec"},
		{w.User != "", "user"}, {len(w.After) > 0, "after"}, {len(w.Uses) > 0, "uses"}} {
		if f.set {
			p.add(f.name, "kind external runs nothing, so it takes no %s", f.name)
		}
	}
	if len(w.Endpoints) == 0 {
		p.add("endpoints", "kind external stands for endpoints: name at least one, with location: external and its address")
	}
	for i, e := range w.Endpoints {
		if !e.External() {
			p.add(joinPath(indexPath("endpoints", i), "location"), "kind external runs nothing, so each of its endpoints is location: external")
		}
	}
}
