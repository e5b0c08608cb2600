package sandbox

import "sync"

// cgroupLocks orders, per cgroup, starts (shared) against kills and
// deletes (exclusive). On v1 a thread of the daemon sits inside the cgroup
// while it forks a child there: a freeze at that moment would freeze the
// daemon's thread, and a kill of every pid in cgroup.procs would include
// the daemon. Keyed by the cgroup's path so that every Cgroup value for the
// same cgroup shares one lock; an entry lives while someone holds or waits
// for it. The embedded mutex guards m and every entry's refs; it is never
// held while an entry's rw is waited for.
var cgroupLocks = struct {
	sync.Mutex
	m map[string]*cgroupLock
}{m: map[string]*cgroupLock{}}

// cgroupLock is one cgroup's: rw is the lock itself (shared for a start,
// exclusive for a kill or a delete), guarding no field; refs, under
// cgroupLocks' mutex, counts who holds or waits for it.
type cgroupLock struct {
	rw   sync.RWMutex
	refs int
}

// lockCgroup takes the lock of the cgroup at path, exclusive or shared,
// and returns its release.
func lockCgroup(path string, exclusive bool) (unlock func()) {
	cgroupLocks.Lock()
	l := cgroupLocks.m[path]
	if l == nil {
		l = &cgroupLock{}
		cgroupLocks.m[path] = l
	}
	l.refs++
	cgroupLocks.Unlock()

	if exclusive {
		l.rw.Lock()
	} else {
		l.rw.RLock()
	}
	return func() {
		if exclusive {
			l.rw.Unlock()
		} else {
			l.rw.RUnlock()
		}
		cgroupLocks.Lock()
		if l.refs--; l.refs == 0 {
			delete(cgroupLocks.m, path)
		}
		cgroupLocks.Unlock()
	}
}
