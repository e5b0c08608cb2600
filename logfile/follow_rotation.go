package logfile

import (
	"io"
	"os"
	"slices"
)

// generation is an open rotated file and its identity at opening.
type generation struct {
	f  *os.File
	fi os.FileInfo
}

func closeAll(gens []generation) {
	for _, g := range gens {
		g.f.Close()
	}
}

// catchUp writes the generations that rotations have completed since
// Follow last looked, and reports whether there were any. The oldest of
// them holds the live file Follow was reading, so it is written from
// Follow's offset; the others are written whole. It repeats until none
// are left, so a rotation finishing meanwhile is not mistaken for the
// live file.
func (fl *follower) catchUp() (bool, error) {
	rotated := false
	for {
		gens, contiguous, err := fl.newGenerations()
		if err != nil || len(gens) == 0 {
			return rotated, err
		}
		err = fl.writeGenerations(gens, contiguous)
		closeAll(gens)
		if err != nil {
			return true, err
		}
		rotated = true
		fl.prev = gens[len(gens)-1].fi
		fl.off, fl.last = 0, nil
		if fl.renamedAway(gens) {
			// A renaming rotation took the file being read: it was written
			// above to its end, and the live file is a new one.
			fl.closeLive()
			if err := fl.openLive(false); err != nil {
				return true, err
			}
		}
	}
}

// renamedAway reports whether the live file being read is one of gens.
func (fl *follower) renamedAway(gens []generation) bool {
	if fl.live == nil {
		return false
	}
	fi, err := fl.live.Stat()
	if err != nil {
		return false
	}
	return slices.ContainsFunc(gens, func(g generation) bool { return os.SameFile(g.fi, fi) })
}

func (fl *follower) writeGenerations(gens []generation, contiguous bool) error {
	oldest := gens[0]
	from := min(fl.off, oldest.fi.Size())
	if !contiguous {
		// prev was dropped, so the oldest left may be a later rotation
		// than the one that took Follow's file; only its bytes tell.
		ok, err := holdsAt(oldest.f, fl.off, fl.last)
		if err != nil {
			return err
		}
		if !ok {
			from = 0
		}
	}
	for _, g := range gens {
		if _, err := io.CopyBuffer(writerFunc(fl.write), io.NewSectionReader(g.f, from, g.fi.Size()-from), fl.buf); err != nil {
			return err
		}
		from = 0
	}
	return nil
}

// newGenerations opens, oldest first, the generations newer than prev
// whose rotation has finished. contiguous reports whether they follow
// prev directly (or there is no prev); if not, rotations dropped
// generations Follow had not read yet.
//
// It goes by identity, not by name, because names shift under it while
// it looks: a generation seen twice is skipped.
func (fl *follower) newGenerations() (gens []generation, contiguous bool, err error) {
	defer func() {
		if err != nil {
			closeAll(gens)
			gens = nil
		}
	}()
	contiguous = fl.prev == nil
	for k := 1; k <= fl.generations; k++ {
		f, fi, err := openGeneration(fl.path, k)
		if err != nil {
			return gens, false, err
		}
		if f == nil {
			continue
		}
		if fl.prev != nil && sameGeneration(fi, fl.prev) {
			f.Close()
			contiguous = true
			break
		}
		if slices.ContainsFunc(gens, func(g generation) bool { return sameGeneration(g.fi, fi) }) {
			f.Close()
			continue
		}
		gens = append(gens, generation{f, fi})
	}
	if len(gens) > 0 {
		finished, err := fl.finished(gens[0])
		if err != nil {
			return gens, false, err
		}
		if !finished {
			gens[0].f.Close()
			gens = gens[1:]
		} else if gens[0].fi, err = gens[0].f.Stat(); err != nil {
			// Opened while Rotate was still draining into it: only now,
			// after the truncate, is its size final.
			return gens, false, err
		}
	}
	slices.Reverse(gens)
	return gens, contiguous, nil
}

// finished reports whether the rotation that made g has truncated the
// live file. Rotate renames g into place just before it truncates; until
// then the live file still starts with g's bytes, and reading both would
// repeat them.
func (fl *follower) finished(g generation) (bool, error) {
	if fl.live == nil {
		return true, nil
	}
	if fi, err := fl.live.Stat(); err == nil && os.SameFile(fi, g.fi) {
		// Renamed, not copied: its writer (the daemon) never writes it
		// again.
		return true, nil
	}
	size := g.fi.Size()
	if size == 0 {
		return true, nil // nothing in it to repeat
	}
	tail := make([]byte, min(size, fingerprintLen))
	if _, err := g.f.ReadAt(tail, size-int64(len(tail))); err != nil {
		return false, err
	}
	same, err := holdsAt(fl.live, size, tail)
	return !same, err
}

// sameGeneration tells whether a and b are the same generation file.
// The inode alone is not enough: a dropped generation's inode number is
// soon reused for a new one. A finished generation never changes, so
// size and modification time tell the two apart.
func sameGeneration(a, b os.FileInfo) bool {
	return os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime())
}

type writerFunc func([]byte) error

func (f writerFunc) Write(p []byte) (int, error) {
	if err := f(p); err != nil {
		return 0, err
	}
	return len(p), nil
}
