package logfile

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// maxCopyRounds bounds the catch-up copies so a workload that writes
// faster than we copy cannot keep Rotate busy forever; whatever it wrote
// during the last round is still taken by the final round.
const maxCopyRounds = 4

// Set by tests only. testHookAfterCopyRound runs after each catch-up
// round so a test can append at the worst moment; testHookFinalDrain
// marks the start of the loss window so a test can check that nothing
// is lost outside it.
var (
	testHookAfterCopyRound func(round int)
	testHookFinalDrain     func()
)

// Rotate rotates the live file at path if it has reached maxSize bytes
// (maxSize <= 0 means DefaultMaxSize), keeping generations old files:
// path.1 newest … path.N oldest, the oldest dropped. It reports whether it
// rotated. When there is nothing to do it costs one stat, so call it as
// often as you like. With generations <= 0 the live file is only
// truncated. Callers must not rotate the same path concurrently.
//
// The workload keeps writing throughout, so Rotate copies the file, then
// copies again what was appended meanwhile until nothing more arrives,
// and truncates immediately after the last copy. No byte is ever
// duplicated, but a write that completes between that last read and the
// truncate (a window of a few microseconds) is destroyed by the truncate:
// nothing can close that window without the writer's cooperation.
// Measured against a shell printing 250,000 lines a second it costs
// about one line per rotation; a workload writing a line a millisecond
// would lose one line in several hundred rotations. A lost write that
// straddles a page boundary can leave its first part at the end of
// path.1. The window widens if the daemon is descheduled inside it, so a
// heavily loaded machine loses more. The new generation is renamed into
// place before the truncate, so once the live file has shrunk, path.1
// holds everything that was in it.
func Rotate(path string, maxSize int64, generations int) (bool, error) {
	return RotateHeld(path, maxSize, generations, nil)
}

// RotateHeld is Rotate with the writers held still while the live file is
// copied and truncated: hold stops them (a cgroup freezer) and returns
// what resumes them. The loss window of Rotate is then closed. hold runs
// only when a rotation is due; nil means no hold.
func RotateHeld(path string, maxSize int64, generations int, hold func() (release func(), err error)) (bool, error) {
	moved, err := rotate(path, maxSize, generations, hold)
	return moved >= 0, err
}

// rotate is RotateHeld; it returns how many bytes left the live file, or
// -1 when it did not rotate.
func rotate(path string, maxSize int64, generations int, hold func() (release func(), err error)) (int64, error) {
	if maxSize <= 0 {
		maxSize = DefaultMaxSize
	}
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return -1, nil
	}
	if err != nil {
		return -1, err
	}
	if fi.Size() < maxSize {
		return -1, nil
	}
	// Writable because truncation goes through this descriptor; nothing
	// is ever written through it.
	live, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return -1, err
	}
	defer live.Close()
	if hold != nil {
		release, err := hold()
		if err != nil {
			return -1, err
		}
		defer release()
	}
	if generations <= 0 {
		fi, err := live.Stat()
		if err != nil {
			return -1, err
		}
		return fi.Size(), live.Truncate(0)
	}
	if err := shiftGenerations(path, generations); err != nil {
		return -1, err
	}
	return copyTruncate(live, path, fi.Mode().Perm())
}

// shiftGenerations makes room for a new path.1 by renaming each older
// generation one step older, dropping the one that would exceed the
// limit. Gaps (a generation missing) are skipped, not closed.
func shiftGenerations(path string, generations int) error {
	if err := os.Remove(genPath(path, generations)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	for k := generations - 1; k >= 1; k-- {
		err := os.Rename(genPath(path, k), genPath(path, k+1))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// copyTruncate copies live into a fresh path.1 and truncates live,
// returning the size of path.1. The copy is built under a temporary name
// so path.1 never appears partial.
func copyTruncate(live *os.File, path string, perm fs.FileMode) (int64, error) {
	// Truncated: a crashed Rotate may have left it.
	tmp, err := os.OpenFile(tempPath(path), os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, perm)
	if err != nil {
		return -1, err
	}
	// After the rename, removing the temporary name is a harmless no-op,
	// so this cleanup is safe on every path.
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	// Generations are read by the same people as the live file.
	if err := tmp.Chmod(perm); err != nil {
		return -1, err
	}
	if err := copyUntilStable(tmp, live); err != nil {
		return -1, err
	}
	// Durable before the original is destroyed.
	if err := tmp.Sync(); err != nil {
		return -1, err
	}
	if err := os.Rename(tmp.Name(), genPath(path, 1)); err != nil {
		return -1, err
	}
	// tmp still refers to path.1 after the rename.
	if err := drainAndTruncate(tmp, live); err != nil {
		return -1, err
	}
	fi, err := tmp.Stat()
	if err != nil {
		return -1, err
	}
	return fi.Size(), nil
}

// drainAndTruncate copies what is left in src to dst and truncates src.
// The read that finds src at its end and the truncate are adjacent
// system calls with nothing in between, because the gap between them is
// the whole loss window. io.Copy is avoided here: when copy_file_range
// finds nothing to copy it falls back to allocating a buffer and reading,
// which widens the window several times over. If copying fails, src is
// left alone: better duplicated than lost.
func drainAndTruncate(dst, src *os.File) error {
	buf := make([]byte, 64<<10)
	if testHookFinalDrain != nil {
		testHookFinalDrain()
	}
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, err := dst.Write(buf[:n]); err != nil {
				return err
			}
			continue
		}
		if errors.Is(err, io.EOF) {
			return src.Truncate(0)
		}
		if err != nil {
			return err
		}
	}
}

// copyUntilStable copies src from its current offset to dst, then keeps
// copying what was appended during the previous round, until a round
// finds the size unchanged or maxCopyRounds is reached. Each round is
// shorter than the last, which is what shrinks the final loss window to
// the time of one small read.
func copyUntilStable(dst, src *os.File) error {
	var copied int64
	for round := 1; ; round++ {
		n, err := io.Copy(dst, src)
		if err != nil {
			return err
		}
		copied += n
		if testHookAfterCopyRound != nil {
			testHookAfterCopyRound(round)
		}
		fi, err := src.Stat()
		if err != nil {
			return err
		}
		if fi.Size() <= copied || round == maxCopyRounds {
			return nil
		}
	}
}
