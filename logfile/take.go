package logfile

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// MinMaxSize is the smallest size a log is rotated at: below it a
// generation would hold little more than its marks.
const MinMaxSize = 4 << 10

// A log the daemon writes (Take, Append) is bounded where it is written:
// before each write the live file and its share of the index (a mark of
// markSize bytes per write) are checked against maxSize, and the write
// is cut to what fits, or the live file is rotated first. Rotation is a
// rename: only the daemon writes the file, so nothing holds it open for
// writing once it is renamed away. Every generation, with its marks, so
// stays within maxSize, and the whole log within maxSize × (generations
// + 1) plus the index's header; while a rotation rewrites the index, its
// new copy exists beside the old one for that moment.

// Take moves up to max bytes waiting in the pipe fd into the log (a
// splice: they never pass through the daemon's memory) and dates them
// with the time they were read. It returns 0 and nil when the pipe is
// empty, and io.EOF once every writer has closed it and it is drained.
func (l *Log) Take(fd int, max int) (int, error) {
	l.amu.Lock()
	defer l.amu.Unlock()
	n, err := l.put(max, func(live *os.File, off int64, n int) (int, error) {
		for {
			m, err := unix.Splice(fd, nil, int(live.Fd()), &off, n, unix.SPLICE_F_NONBLOCK|unix.SPLICE_F_MOVE)
			switch {
			case errors.Is(err, unix.EINTR):
				continue
			case errors.Is(err, unix.EAGAIN):
				return 0, nil
			case errors.Is(err, unix.EINVAL):
				return copyAt(fd, live, off, n) // a file system without splice
			case err != nil:
				return 0, err
			case m == 0:
				return 0, io.EOF
			}
			return int(m), nil
		}
	})
	return n, err
}

// copyAt is Take's move where splice is refused.
func copyAt(fd int, live *os.File, off int64, n int) (int, error) {
	buf := make([]byte, min(n, 64<<10))
	m, err := unix.Read(fd, buf)
	switch {
	case errors.Is(err, unix.EAGAIN):
		return 0, nil
	case err != nil:
		return 0, err
	case m == 0:
		return 0, io.EOF
	}
	if _, err := live.WriteAt(buf[:m], off); err != nil {
		return 0, err
	}
	return m, nil
}

// Append writes p to the log as one read of it would: the daemon's own
// lines about a workload (a start that failed) go where its output goes.
func (l *Log) Append(p []byte) error {
	l.amu.Lock()
	defer l.amu.Unlock()
	for len(p) > 0 {
		n, err := l.put(len(p), func(live *os.File, off int64, n int) (int, error) {
			return live.WriteAt(p[:n], off)
		})
		if err != nil {
			return err
		}
		p = p[n:]
	}
	return nil
}

// put makes room for up to want bytes, has move write them at the live
// file's end, and marks what it wrote. The caller holds amu.
func (l *Log) put(want int, move func(live *os.File, off int64, n int) (int, error)) (int, error) {
	x, err := l.index()
	if err != nil {
		return 0, err
	}
	if err := l.openLive(x); err != nil {
		return 0, err
	}
	// The file's own size, not a count kept here: a run of an earlier
	// daemon may have written it directly.
	fi, err := l.live.Stat()
	if err != nil {
		return 0, err
	}
	size, limit := fi.Size(), max(l.maxSize.Load(), MinMaxSize)
	room := limit - size - int64(l.liveMarks+1)*markSize
	if room <= 0 {
		if err := l.rotateLive(x, size); err != nil {
			return 0, err
		}
		size, room = 0, limit-markSize
	}
	n, err := move(l.live, size, int(min(room, int64(want))))
	if n > 0 {
		// A daemon killed before this mark leaves those bytes dated by
		// the next one.
		if merr := x.add(x.livePos()+size+int64(n), time.Now()); merr != nil {
			err = errors.Join(err, merr)
		} else {
			l.liveMarks++
		}
		l.wakeReaders()
	}
	return n, err
}

// openLive opens the live file for writing, if it is not yet, and counts
// the marks it has. The caller holds amu.
func (l *Log) openLive(x *index) error {
	if l.live != nil && l.liveMarks >= 0 {
		return nil
	}
	if l.live == nil {
		f, created, err := createLive(l.path)
		if err != nil {
			return err
		}
		if created {
			setPos(f, x.livePos())
		}
		if err := x.hold(); err != nil {
			f.Close()
			return err
		}
		l.live = f
	}
	l.liveMarks = x.marksAfter(x.livePos())
	return nil
}

// createLive opens the live file at path to be written at offsets (no
// O_APPEND: splice refuses it), creating it 0640.
func createLive(path string) (f *os.File, created bool, err error) {
	if err := mkdirAll(filepath.Dir(path)); err != nil {
		return nil, false, err
	}
	f, err = os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, fileMode)
	if errors.Is(err, fs.ErrExist) {
		f, err = os.OpenFile(path, os.O_WRONLY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
		return f, false, err
	}
	if err != nil {
		return nil, false, err
	}
	if err := f.Chmod(fileMode); err != nil {
		f.Close()
		return nil, false, err
	}
	return f, true, nil
}

// rotateLive renames the live file, of size bytes, to generation 1 and
// starts an empty one. Readers keep what they opened: nothing is
// truncated, so they need not be waited for, only kept from placing
// themselves while names and base change. The caller holds amu.
func (l *Log) rotateLive(x *index, size int64) error {
	l.names.Lock()
	defer l.names.Unlock()
	if l.generations > 0 {
		if err := shiftGenerations(l.path, l.generations); err != nil {
			return err
		}
		if err := os.Rename(l.path, genPath(l.path, 1)); err != nil {
			return err
		}
	} else if err := os.Remove(l.path); err != nil {
		return err
	}
	l.live.Close()
	l.live = nil
	base := x.livePos() + size
	f, _, err := createLive(l.path)
	if err != nil {
		return err
	}
	setPos(f, base)
	l.live, l.liveMarks = f, 0
	// A crash before this rewrite leaves the base behind by one
	// generation until the next daemon settles it (settle.go).
	return x.rebase(base, base-l.heldBytes())
}

// heldBytes is what the generations hold.
func (l *Log) heldBytes() int64 {
	held := int64(0)
	for k := 1; k <= l.generations; k++ {
		if fi, err := os.Stat(genPath(l.path, k)); err == nil {
			held += fi.Size()
		}
	}
	return held
}

// closeLive lets go of the live file; the caller holds amu.
func (l *Log) closeLive() error {
	if l.live == nil {
		return nil
	}
	err := l.live.Close()
	l.live, l.liveMarks = nil, -1
	return err
}

// changed is closed at the next write Take or Append makes: a follower
// waits on it instead of a poll interval.
func (l *Log) changed() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.wake == nil {
		l.wake = make(chan struct{})
	}
	return l.wake
}

func (l *Log) wakeReaders() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.wake != nil {
		close(l.wake)
		l.wake = nil
	}
}
