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

// fingerprintLen is how many of the last bytes read Follow keeps to find
// its place again in a generation after a rotation.
const fingerprintLen = 64

// Follow writes the last n lines of the log at path (as Tail does) and
// then everything appended to it, until ctx is done. After each write it
// calls Flush if w has one, so an http.ResponseWriter streams.
//
// Follow keeps its offset in the live file. When the file no longer
// holds what Follow read up to that offset (normally it became shorter),
// Rotate has moved its content to path.1: Follow first writes what path.1
// holds beyond the offset (written between its last read and the
// rotation), then continues from the start of the live file, so nothing
// is lost or repeated. It finds its place by matching the last bytes it
// read, so it also copes with a live file that grew back past the offset,
// or several rotations, between two polls. It cannot recover more
// rotations than there are generations between two polls, nor tell a
// rotation from a workload rewriting exactly the same bytes at the same
// offsets.
//
// If the file does not exist yet Follow waits for it, and if it is
// removed or replaced Follow moves on to the new file at path, from its
// start.
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
		buf:         make([]byte, 32<<10),
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

	live *os.File // nil while the file does not exist
	off  int64    // how much of live has been written to w
	last []byte   // the bytes of live just before off, at most fingerprintLen
}

// start writes the initial tail and sets the offset to exactly where
// that tail ended, so nothing appended meanwhile is skipped or repeated.
func (fl *follower) start(n int) error {
	f, err := os.Open(fl.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // everything in it will be new once it appears
	}
	if err != nil {
		return err
	}
	fl.live = f
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if err := tailFrom(fl.w, f, fi.Size(), fl.path, n, fl.generations); err != nil {
		return err
	}
	fl.flush()
	fl.off = fi.Size()
	last := make([]byte, min(fl.off, fingerprintLen))
	if _, err := f.ReadAt(last, fl.off-int64(len(last))); err != nil {
		return err
	}
	fl.last = last
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
	}
}

func (fl *follower) poll() error {
	if fl.live == nil {
		f, err := os.Open(fl.path)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		fl.live, fl.off, fl.last = f, 0, nil
	}
	fi, err := fl.live.Stat()
	if err != nil {
		return err
	}
	rotated, err := fl.rotated(fi.Size())
	if err != nil {
		return err
	}
	if rotated {
		if err := fl.catchUp(); err != nil {
			return err
		}
		fl.off, fl.last = 0, nil
	}
	if err := fl.copyLive(); err != nil {
		return err
	}
	// Checked after draining so the old file's last bytes are not lost.
	if cur, err := os.Stat(fl.path); err != nil || !os.SameFile(cur, fi) {
		fl.closeLive()
	}
	return nil
}

// rotated reports whether the live file is no longer the one Follow has
// read up to off. Shrinking is the usual sign; comparing the bytes before
// off also catches a live file that was truncated and has already grown
// back past off since the last poll.
func (fl *follower) rotated(size int64) (bool, error) {
	if size < fl.off {
		return true, nil
	}
	if fl.off == 0 {
		return false, nil
	}
	seen := make([]byte, len(fl.last))
	n, err := fl.live.ReadAt(seen, fl.off-int64(len(seen)))
	if err != nil && !errors.Is(err, io.EOF) {
		return false, err
	}
	return !bytes.Equal(seen[:n], fl.last), nil
}

// copyLive writes everything in the live file past off.
func (fl *follower) copyLive() error {
	for fl.ctx.Err() == nil {
		n, err := fl.live.ReadAt(fl.buf, fl.off)
		if n > 0 {
			if err := fl.write(fl.buf[:n]); err != nil {
				return err
			}
			fl.off += int64(n)
			fl.remember(fl.buf[:n])
		}
		if errors.Is(err, io.EOF) || n == 0 {
			return nil
		}
		if err != nil {
			return err
		}
	}
	return nil
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

// catchUp runs after the live file shrank. It finds the generation that
// holds the live file as it was when Follow last read it (normally
// path.1) and writes the rest of it, then any newer generations whole.
// If none matches, the file was truncated by something other than
// Rotate and there is nothing to recover.
func (fl *follower) catchUp() error {
	for k := 1; k <= fl.generations; k++ {
		found, err := fl.writeGenerationFrom(k, fl.off)
		if err != nil {
			return err
		}
		if !found {
			continue
		}
		for newer := k - 1; newer >= 1; newer-- {
			if _, err := fl.writeGenerationFrom(newer, 0); err != nil {
				return err
			}
		}
		return nil
	}
	return nil
}

// writeGenerationFrom writes generation k from offset off if its bytes
// just before off are the ones Follow last read from the live file, and
// reports whether it did. A missing generation does not match.
func (fl *follower) writeGenerationFrom(k int, off int64) (bool, error) {
	g, err := os.Open(genPath(fl.path, k))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer g.Close()
	if off > 0 {
		seen := make([]byte, len(fl.last))
		n, err := g.ReadAt(seen, off-int64(len(seen)))
		if n < len(seen) || !bytes.Equal(seen, fl.last) {
			return false, nil
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return false, err
		}
	}
	for {
		n, err := g.ReadAt(fl.buf, off)
		if n > 0 {
			if err := fl.write(fl.buf[:n]); err != nil {
				return true, err
			}
			off += int64(n)
		}
		if errors.Is(err, io.EOF) || n == 0 {
			return true, nil
		}
		if err != nil {
			return true, err
		}
	}
}

func (fl *follower) closeLive() {
	if fl.live != nil {
		fl.live.Close()
		fl.live = nil
	}
}
