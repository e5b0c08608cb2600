package logfile

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"time"
)

// FollowPollInterval is how often Follow looks for new data. Polling
// rather than inotify keeps Follow to plain file reads that work on any
// filesystem and cost nothing when nobody follows. Set it before any
// Follow runs; each call reads it once.
var FollowPollInterval = 100 * time.Millisecond

// fingerprintLen is how many bytes Follow compares to tell whether a
// file still holds what it read there.
const fingerprintLen = 64

// Follow writes the last n lines of the log at path (as Tail does) and
// then everything appended to it, until ctx is done. After each write it
// calls Flush if w has one, so an http.ResponseWriter streams.
//
// Follow keeps its offset in the live file. When Rotate moves the live
// file's content to path.1, Follow first writes what path.1 holds beyond
// that offset (written between its last read and the rotation), then
// continues from the start of the live file, so nothing is lost or
// repeated. It tells generations apart by identity rather than by name,
// and writes nothing it read from the live file until it has checked
// that no rotation took the file meanwhile, so several rotations between
// two polls, or a rotation caught half-way, are handled too.
//
// What Follow cannot recover: generations dropped before it saw them
// (more rotations than generations within one poll interval), and bytes
// destroyed in Rotate's loss window before it read them. It notices a
// truncation by comparing bytes, so it assumes a workload does not
// rewrite, right after a rotation, exactly the bytes the file held
// before at the same offsets.
//
// If the file does not exist yet Follow waits for it, and if it is
// removed or replaced Follow moves on to the new file at path, from its
// start. A live file truncated by something other than Rotate is
// followed from its new start.
//
// Follow returns nil once ctx is done, within one poll interval; that is
// the normal way to stop it. A non-nil error means reading the log or
// writing to w failed. Follow starts no goroutines.
func Follow(ctx context.Context, w io.Writer, path string, n int, generations int) error {
	fl := &follower{
		ctx:         ctx,
		w:           w,
		flush:       func() {},
		path:        path,
		generations: generations,
		interval:    FollowPollInterval,
		buf:         make([]byte, 64<<10),
	}
	if f, ok := w.(interface{ Flush() }); ok {
		fl.flush = f.Flush
	}
	defer fl.closeLive()
	if err := fl.start(n); err != nil {
		return err
	}
	for fl.sleep() {
		if err := fl.poll(); err != nil {
			return err
		}
	}
	return nil
}

type follower struct {
	ctx         context.Context
	w           io.Writer
	flush       func()
	path        string
	generations int
	interval    time.Duration
	buf         []byte
	// changes, when set, says when the log is next written (Log.changed):
	// the follower waits for that rather than the whole interval.
	changes func() <-chan struct{}
	wake    <-chan struct{}

	live *os.File // nil while the file does not exist
	off  int64    // how much of live has been written to w
	last []byte   // the bytes of live just before off, at most fingerprintLen
	// prev is the newest generation already accounted for: written to w,
	// or older than what Follow started from. Generations newer than it
	// hold data rotated out of the live file since.
	prev os.FileInfo
}

// start writes the initial tail and sets the offset to exactly where
// that tail ended, so nothing appended meanwhile is skipped or repeated.
func (fl *follower) start(n int) error {
	if err := fl.openLive(true); err != nil || fl.live == nil {
		return err
	}
	fi, err := fl.live.Stat()
	if err != nil {
		return err
	}
	if err := tailFrom(fl.w, fl.live, fi.Size(), fl.path, n, fl.generations); err != nil {
		return err
	}
	fl.flush()
	fl.off = fi.Size()
	last := make([]byte, min(fl.off, fingerprintLen))
	// Short only if a rotation truncated the file just now; the mismatch
	// then makes the first poll look for that rotation, as it should.
	if _, err := fl.live.ReadAt(last, fl.off-int64(len(last))); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	fl.last = last
	return nil
}

// openLive opens the live file, if there is one, to be read from its
// start; with seen, it takes the generations that exist now as already
// seen. Without, the generations newer than the last one seen are still
// to be read (catchUp): the file was renamed away by a rotation, and
// more rotations may have come before this.
func (fl *follower) openLive(seen bool) error {
	f, err := os.Open(fl.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	fl.live, fl.off, fl.last = f, 0, nil
	if !seen {
		return nil
	}
	fl.prev = nil
	gens, _, err := fl.newGenerations()
	if err != nil {
		return err
	}
	if len(gens) > 0 {
		fl.prev = gens[len(gens)-1].fi
	}
	closeAll(gens)
	return nil
}

func (fl *follower) sleep() bool {
	t := time.NewTimer(fl.interval)
	defer t.Stop()
	select {
	case <-fl.ctx.Done():
		return false
	case <-t.C:
		return true
	case <-fl.wake:
		return true
	}
}

// poll writes whatever the log gained since the last poll.
//
// Each chunk is read from the live file first and written only once it
// is known to still belong where Follow was reading: checked afterwards,
// the live file is unchanged and no rotation has finished. Otherwise the
// chunk is dropped and read again from wherever it is now, the new
// generations or the new live file, so a rotation at any moment neither
// loses nor repeats it.
func (fl *follower) poll() error {
	if fl.changes != nil {
		fl.wake = fl.changes() // before reading: a write after the read wakes it
	}
	if fl.live == nil {
		if err := fl.openLive(false); err != nil || fl.live == nil {
			return err
		}
	}
	fi, err := fl.live.Stat()
	if err != nil {
		return err
	}
	for fl.ctx.Err() == nil {
		n, err := fl.live.ReadAt(fl.buf, fl.off)
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		// In this order: Rotate renames a generation into place before it
		// truncates, so a change seen first is explained by the rotation
		// catchUp then finds, if it was one.
		unchanged, err := holdsAt(fl.live, fl.off, fl.last)
		if err != nil {
			return err
		}
		rotated, err := fl.catchUp()
		if err != nil {
			return err
		}
		switch {
		case rotated && fl.live == nil:
			return nil // renamed away, and no live file yet
		case rotated:
			if fi, err = fl.live.Stat(); err != nil {
				return err
			}
			continue
		case !unchanged:
			fl.off, fl.last = 0, nil // truncated by someone else: nothing to recover
			continue
		case n == 0:
			// Checked after draining so the old file's last bytes are not
			// lost.
			if cur, err := os.Stat(fl.path); err != nil || !os.SameFile(cur, fi) {
				// A renaming rotation that finished since catchUp looked
				// made the file a generation: catchUp takes it from here.
				rotated, err := fl.catchUp()
				if err != nil {
					return err
				}
				if rotated && fl.live != nil {
					if fi, err = fl.live.Stat(); err != nil {
						return err
					}
					continue
				}
				if !rotated {
					fl.closeLive() // removed or replaced
				}
			}
			return nil
		}
		if err := fl.write(fl.buf[:n]); err != nil {
			return err
		}
		fl.off += int64(n)
		fl.remember(fl.buf[:n])
	}
	return nil
}

// holdsAt reports whether f holds want just before offset end.
func holdsAt(f *os.File, end int64, want []byte) (bool, error) {
	got := make([]byte, len(want))
	n, err := f.ReadAt(got, end-int64(len(want)))
	if err != nil && !errors.Is(err, io.EOF) {
		return false, err
	}
	return n == len(want) && bytes.Equal(got, want), nil
}

func (fl *follower) remember(p []byte) {
	if len(p) >= fingerprintLen {
		fl.last = append(fl.last[:0], p[len(p)-fingerprintLen:]...)
		return
	}
	fl.last = append(fl.last, p...)
	if extra := len(fl.last) - fingerprintLen; extra > 0 {
		fl.last = append(fl.last[:0], fl.last[extra:]...)
	}
}

func (fl *follower) write(p []byte) error {
	if _, err := fl.w.Write(p); err != nil {
		return err
	}
	fl.flush()
	return nil
}

func (fl *follower) closeLive() {
	if fl.live != nil {
		fl.live.Close()
		fl.live = nil
	}
}
