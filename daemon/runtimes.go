package daemon

import (
	"context"
	"path/filepath"

	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/driver"
	ctrdriver "github.com/flyd-dev/flyd/driver/containerd"
	"github.com/flyd-dev/flyd/driver/external"
	"github.com/flyd-dev/flyd/driver/native"
	"github.com/flyd-dev/flyd/driver/nix"
	"github.com/flyd-dev/flyd/sandbox"
	"github.com/flyd-dev/flyd/supervisor"
)

// runtimes makes the daemon's driver of every kind (spec.Kinds) this host
// can run, and says in the log what it cannot; release lets them go.
func runtimes(ctx context.Context, cfg *Config, cgroups *sandbox.Cgroups, log *zap.Logger) (drivers []driver.Driver, release func()) {
	drivers = []driver.Driver{native.Driver{Cgroups: cgroups}, external.Driver{}}
	nixDriver := &nix.Driver{Native: native.Driver{Cgroups: cgroups}, CacheDir: filepath.Join(cfg.StateDir, "nix")}
	if err := nixDriver.Available(); err != nil {
		log.Info("no nix runtime: kind nix is refused", zap.Error(err))
	} else {
		drivers = append(drivers, nixDriver)
	}
	// containerd may start after flyd, or restart under it: the driver is
	// always there, and kind containerd is refused only while it does not
	// answer. Its runs are adopted once it does.
	containerd := ctrdriver.New(cfg.ContainerdSocket, "")
	containerd.VolumesDir = filepath.Join(cfg.StateDir, "volumes")
	if err := containerd.Available(ctx); err != nil {
		log.Info("containerd does not answer: kind containerd is refused until it does", zap.Error(err))
	}
	return append(drivers, containerd), func() { containerd.Close() }
}

// callersOfPulls tells the containerd driver who applied each workload:
// an image is pulled with the credentials of that caller's
// ~/.docker/config.json.
func callersOfPulls(drivers []driver.Driver, sup *supervisor.Supervisor) {
	for _, drv := range drivers {
		if c, ok := drv.(*ctrdriver.Driver); ok {
			c.SetCallerOf(func(workload string) (uint32, bool) {
				w, err := sup.Get(context.Background(), workload)
				if err != nil {
					return 0, false
				}
				return w.AppliedBy, true
			})
		}
	}
}
