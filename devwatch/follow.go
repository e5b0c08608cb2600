package devwatch

import (
	"context"

	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/spec"
)

// Follower is the watch of one workload as its spec says, kept by the
// workload's owner on its loop: armed once for each spec that watches
// (spec.Workload.Watches), whether or not its paths could be watched;
// disarmed, its goroutines waited for, when the spec changes or stops
// watching, and on Stop, so that no watch outlives its workload. The
// zero Follower watches nothing. Its methods are called on the loop.
type Follower struct {
	// sp is the spec the watch was armed for; nil while none is.
	sp  *spec.Workload
	act Actions
	set *Set
}

// Stale says whether sp calls for the watch to change: another spec than
// the one armed for, or a spec that watches while none is armed. A
// pointer compared, for every turn of a loop.
func (f *Follower) Stale(sp *spec.Workload) bool {
	return f.sp != sp && (f.sp != nil || sp.Watches())
}

// Follow makes the watch sp's: the one armed is disarmed, and for a sp
// that watches another is armed with actions made by act. ended says that
// a watch was disarmed and none replaces it: sp does not watch.
func (f *Follower) Follow(ctx context.Context, sp *spec.Workload, act func() Actions, log *zap.Logger) (ended bool) {
	was := f.sp != nil
	f.Stop()
	if !sp.Watches() {
		return was
	}
	f.sp, f.act = sp, act()
	f.set = Arm(ctx, sp.Watch, f.act, log)
	return false
}

// Armed says whether act is the actions of the watch armed now: those of
// a watch disarmed since must act no more (ErrGone).
func (f *Follower) Armed(act Actions) bool { return f.sp != nil && f.act == act }

// Stop disarms the watch, if one is armed, and waits for its goroutines.
// An action of it that waits for the loop is not waited for: a call to
// the loop selects on the watch's context too, which ends first.
func (f *Follower) Stop() {
	if f.set != nil {
		f.set.Stop()
	}
	f.sp, f.act, f.set = nil, nil, nil
}
