package logfile

import (
	"errors"
	"io/fs"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// A live file the daemon creates carries its first position in an
// extended attribute, and keeps it when a rotation renames it to a
// generation. A daemon killed in a renaming rotation, after the rename
// and before the index's rewrite, leaves the index's base one generation
// behind; the next one to open the log puts it where the files say
// (settle). A file system without user attributes, and a log its
// workload writes itself, have the index alone, and that window.
const posAttr = "user.flyd.pos"

func setPos(f *os.File, pos int64) {
	_ = unix.Fsetxattr(int(f.Fd()), posAttr, []byte(strconv.FormatInt(pos, 10)), 0)
}

// filePos is the first position recorded on the file at path.
func filePos(path string) (int64, bool) {
	var b [24]byte
	n, err := unix.Getxattr(path, posAttr, b[:])
	if err != nil {
		return 0, false
	}
	pos, err := strconv.ParseInt(string(b[:n]), 10, 64)
	return pos, err == nil && pos >= 0
}

// settle moves the index's base to the live file's recorded position,
// or, when a rotation renamed the live file and died before making the
// next, past generation 1. The caller holds mu, before anyone else uses
// the index.
func (l *Log) settle(x *index) error {
	want, ok := filePos(l.path)
	if !ok {
		if _, err := os.Stat(l.path); !errors.Is(err, fs.ErrNotExist) {
			return nil // a live file with no position: the index says
		}
		p1, ok := filePos(genPath(l.path, 1))
		fi, err := os.Stat(genPath(l.path, 1))
		if !ok || err != nil {
			return nil
		}
		want = p1 + fi.Size()
	}
	if want == x.livePos() {
		return nil
	}
	return x.rebase(want, want-l.heldBytes())
}
