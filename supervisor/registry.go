package supervisor

import (
	"github.com/flyd-dev/flyd/registrar"
	"github.com/flyd-dev/flyd/registryclient"
	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/status"
)

// instances is what the registry should hold for a workload in a state:
// one instance per endpoint while it runs, nothing otherwise; healthy
// without a check, and with one only once it has passed.
func (s *Supervisor) instances(w *spec.Workload, ports []status.PortMapping, st status.State) []registryclient.Instance {
	if st != status.Running || len(ports) == 0 {
		return nil
	}
	return registrar.Instances(w, ports, w.Health == nil || s.healthOf(w.Name), s.host)
}

// publishInstances tells the registrar what the workload should have
// registered now. It never blocks on the registry.
func (w *workload) publishInstances(st status.State) {
	if w.group != "" {
		// A replica takes connections of its group's published ports
		// when it would be announced healthy.
		w.s.net.Serving(w.name, st == status.Running && (w.spec.Health == nil || w.s.healthOf(w.name)))
	}
	if w.s.cfg.Registrar == nil {
		return
	}
	w.s.cfg.Registrar.Set(w.name, w.s.instances(w.spec, w.ports, st))
}

// healthOf is the last verdict of a workload's health check.
func (s *Supervisor) healthOf(name string) bool {
	w, err := s.lookup(name)
	if err != nil {
		return false
	}
	v := w.snapshot(false)
	return v.Healthy != nil && *v.Healthy
}
