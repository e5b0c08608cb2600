package declarative

import (
	"context"
	"errors"
	"time"

	"go.uber.org/zap"
)

// Run does a full reconcile at once, then watches until ctx is done, and
// returns nil then. A missing directory is not an error: it is watched for
// when it appears (the nearest existing parent is watched), and treated as
// empty. Run may be called once.
func (w *Watcher) Run(ctx context.Context) error {
	if !w.started.CompareAndSwap(false, true) {
		return errors.New("declarative: Run called more than once")
	}
	d := &dirWatch{dir: w.dir, log: w.log}
	defer d.close()
	// Watch before the first reconcile, so a change made while it runs is
	// seen afterwards. A failure is retried at every resync.
	if err := d.arm(); err != nil {
		w.log.Warn("cannot watch workloads directory; relying on periodic resync", zap.Error(err))
	}
	w.reconcileLogged(ctx)

	debounce := time.NewTimer(w.debounce)
	debounce.Stop()
	defer debounce.Stop()
	resync := time.NewTicker(w.resync)
	defer resync.Stop()

	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-d.events():
			if !ok {
				d.close() // closed under us: re-armed at the next resync
				continue
			}
			if d.handle(ev) {
				debounce.Reset(w.debounce)
			}
		case err, ok := <-d.errors():
			if !ok {
				d.close()
				continue
			}
			// Typically an overflow: events were lost, which a full
			// reconcile makes up for.
			w.log.Warn("watching workloads directory", zap.Error(err))
			debounce.Reset(w.debounce)
		case <-debounce.C:
			w.reconcileLogged(ctx)
		case <-resync.C:
			if d.stale() {
				if err := d.arm(); err != nil {
					w.log.Warn("cannot watch workloads directory", zap.Error(err))
				}
			}
			w.reconcileLogged(ctx)
		}
	}
}

// reconcileLogged reconciles for Run, which has no one to return errors to:
// they are the directory's Problems, logged when they appear.
func (w *Watcher) reconcileLogged(ctx context.Context) {
	_ = w.reconcile(ctx)
}
