package devwatch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/spec"
)

// act does the entry's action about what changed, and says what it did.
func (r *rule) act(ctx context.Context, ch *changes) {
	prefix := fmt.Sprintf("watch[%d] %s: %s: ", r.i, r.e.Path, ch)
	var did string
	var err error
	switch r.e.Action {
	case spec.WatchExec:
		did, err = r.rebuild(ctx)
	case spec.WatchSync:
		did, err = r.sync(ctx, ch)
	default:
		did, err = r.acts.Restart(ctx)
	}
	switch {
	case ctx.Err() != nil || errors.Is(err, ErrGone):
		return // disarmed meanwhile: the workload changed or went
	case err != nil:
		r.log.Warn("watch action failed", zap.Int("entry", r.i), zap.Error(err))
		did = err.Error()
	}
	r.log.Info("watch", zap.Int("entry", r.i), zap.String("changed", ch.String()), zap.String("did", did))
	r.acts.Say(prefix + did)
}

// rebuild runs the entry's command, as reload's exec runs, and restarts
// the workload once it succeeds; one that fails leaves the run as it is,
// and says why in the workload's log too.
func (r *rule) rebuild(ctx context.Context) (string, error) {
	run, skip, err := r.acts.Command(ctx, r.e.Exec)
	if err != nil || skip != "" {
		return skip, err
	}
	start := time.Now()
	cctx, cancel := context.WithTimeout(ctx, ExecTimeout)
	err = run(cctx)
	cancel()
	took := time.Since(start).Round(time.Millisecond)
	if ctx.Err() != nil {
		return "", ctx.Err()
	}
	if err != nil {
		msg := fmt.Sprintf("exec %s failed after %s, so the last run goes on: %v", r.e.Exec[0], took, err)
		r.acts.Log(ctx, "flyd: watch: "+msg)
		return msg, nil
	}
	did, err := r.acts.Restart(ctx)
	return fmt.Sprintf("exec %s done in %s; %s", r.e.Exec[0], took, did), err
}
