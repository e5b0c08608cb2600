package logfile

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"sync"
	"syscall"
	"time"
)

// A log's index, at path.index, gives its bytes positions and times.
//
// A position counts every byte the log ever held: the live file's first
// byte is at the index's base, which a rotation moves on by what it
// rotated away, so a position names one byte for the whole life of the
// log, across rotations and daemon restarts. A reader that stopped at a
// position can resume there exactly.
//
// A mark says that by a time the log held the bytes before a position,
// and a line is dated by the first mark at or past its end. The daemon
// marks each read of a pipe it writes into the log, with the time of
// that read: a line is dated when it was read, exactly, and a line
// longer than a read gets a time a read. For a log its workload writes
// itself, marks are taken from the live file's modification time
// whenever the daemon's log loop sees it grow, so a line is dated at the
// latest write before that look.
//
// On disk: a header of indexMagic and the base, then marks, each a
// position and a Unix time in nanoseconds, all little-endian uint64s. A
// torn last mark (a crash mid-append) is ignored.
const (
	indexMagic  = "flydlog1"
	headerSize  = 16
	markSize    = 16
	indexSuffix = ".index"
)

func indexPath(path string) string { return path + indexSuffix }

// mark is one (position, time) pair of an index.
type mark struct {
	pos int64
	at  time.Time
}

// index is a log's index: what it holds is kept in memory, and the file
// is open only during an operation (a daemon with thousands of logs
// holds no descriptor for each). Its own lock serialises its file; the
// shape of the log (base against the live file) is guarded by Log's.
type index struct {
	mu   sync.Mutex
	path string
	f    *os.File // open during an operation only
	// held keeps the file open between operations while the daemon
	// writes the log (a mark a read): see hold.
	held *os.File
	base int64
	n    int  // marks on disk
	last mark // the newest mark, zero when there is none
}

// openIndex opens or creates the index of the log at path. One that is
// not an index (a foreign file, a wrong magic) is an error naming it,
// never overwritten.
func openIndex(path string) (*index, error) {
	ip := indexPath(path)
	f, err := os.OpenFile(ip, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, fileMode)
	if err != nil {
		return nil, err
	}
	x := &index{path: ip, f: f}
	err = x.load()
	f.Close()
	x.f = nil
	if err != nil {
		return nil, err
	}
	return x, nil
}

// opened runs op with the index's file open; the caller holds mu.
func (x *index) opened(op func() error) error {
	if x.held != nil {
		x.f = x.held
		defer func() { x.f = nil }()
		return op()
	}
	f, err := os.OpenFile(x.path, os.O_RDWR|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	x.f = f
	defer func() {
		x.f.Close()
		x.f = nil
	}()
	return op()
}

func (x *index) load() error {
	fi, err := x.f.Stat()
	if err != nil {
		return err
	}
	if fi.Size() == 0 {
		return x.writeHeader()
	}
	var h [headerSize]byte
	if _, err := x.f.ReadAt(h[:], 0); err != nil || !bytes.Equal(h[:8], []byte(indexMagic)) {
		return fmt.Errorf("%s is not a flyd log index", x.path)
	}
	x.base = int64(binary.LittleEndian.Uint64(h[8:]))
	x.n = int((fi.Size() - headerSize) / markSize)
	if x.n > 0 {
		x.last, err = x.at(x.n - 1)
	}
	return err
}

func (x *index) writeHeader() error {
	var h [headerSize]byte
	copy(h[:], indexMagic)
	binary.LittleEndian.PutUint64(h[8:], uint64(x.base))
	_, err := x.f.WriteAt(h[:], 0)
	return err
}

func (x *index) at(i int) (mark, error) {
	m, err := x.read(i, i+1)
	if err != nil {
		return mark{}, err
	}
	return m[0], nil
}

// close is what a Log does with its index when it is done: it lets go
// of the file if hold kept it open.
func (x *index) close() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.held == nil {
		return nil
	}
	err := x.held.Close()
	x.held = nil
	return err
}

// hold keeps the index's file open until close: a log the daemon writes
// gets a mark each read, and an open and a close each would cost more
// than the write.
func (x *index) hold() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.held != nil {
		return nil
	}
	f, err := os.OpenFile(x.path, os.O_RDWR|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	x.held = f
	return nil
}

// marksAfter is how many marks date bytes past pos: those of a live
// file that starts at pos.
func (x *index) marksAfter(pos int64) int {
	x.mu.Lock()
	defer x.mu.Unlock()
	n := 0
	_ = x.opened(func() error {
		n = x.n - x.search(func(m mark) bool { return m.pos > pos })
		return nil
	})
	return n
}

// livePos is the position of the live file's first byte.
func (x *index) livePos() int64 {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.base
}

// add records that the log held the bytes before pos at t. Nothing is
// written unless the log grew past the last mark; a time earlier than the
// last mark's (a clock stepped back) is taken as that mark's, so marks
// stay ordered by both.
func (x *index) add(pos int64, t time.Time) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if pos <= x.last.pos {
		return nil
	}
	if t.Before(x.last.at) {
		t = x.last.at
	}
	var b [markSize]byte
	binary.LittleEndian.PutUint64(b[:8], uint64(pos))
	binary.LittleEndian.PutUint64(b[8:], uint64(t.UnixNano()))
	if err := x.opened(func() error {
		_, err := x.f.WriteAt(b[:], headerSize+int64(x.n)*markSize)
		return err
	}); err != nil {
		return err
	}
	x.n++
	x.last = mark{pos, t}
	return nil
}

// rebase moves the base to base and drops the marks before keep, the
// first position the log still holds. The index is rewritten under a
// temporary name and renamed over the old one, so a crash leaves one or
// the other.
func (x *index) rebase(base, keep int64) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	var marks []mark
	if err := x.opened(func() error {
		var err error
		marks, err = x.read(x.search(func(m mark) bool { return m.pos > keep }), x.n)
		return err
	}); err != nil {
		return err
	}
	tmp := x.path + ".new"
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, fileMode)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	buf := make([]byte, headerSize, headerSize+len(marks)*markSize)
	copy(buf, indexMagic)
	binary.LittleEndian.PutUint64(buf[8:], uint64(base))
	for _, m := range marks {
		buf = binary.LittleEndian.AppendUint64(buf, uint64(m.pos))
		buf = binary.LittleEndian.AppendUint64(buf, uint64(m.at.UnixNano()))
	}
	_, err = f.Write(buf)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, x.path); err != nil {
		return err
	}
	x.base, x.n = base, len(marks)
	if x.held != nil {
		// The held file is the old index now, unlinked.
		x.held.Close()
		x.held = nil
		f, err := os.OpenFile(x.path, os.O_RDWR|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		x.held = f
	}
	return nil
}

// search is the first mark for which ok holds, ok being false then true
// along the marks; x.n when there is none. Read errors count as true,
// and show up when that mark is read.
func (x *index) search(ok func(mark) bool) int {
	return sort.Search(x.n, func(i int) bool {
		m, err := x.at(i)
		return err != nil || ok(m)
	})
}

// read returns marks i to j-1.
func (x *index) read(i, j int) ([]mark, error) {
	if i >= j {
		return nil, nil
	}
	buf := make([]byte, (j-i)*markSize)
	if _, err := x.f.ReadAt(buf, headerSize+int64(i)*markSize); err != nil {
		return nil, err
	}
	marks := make([]mark, j-i)
	for k := range marks {
		b := buf[k*markSize:]
		marks[k] = mark{int64(binary.LittleEndian.Uint64(b[:8])), time.Unix(0, int64(binary.LittleEndian.Uint64(b[8:16])))}
	}
	return marks, nil
}

// marksFrom returns the marks past pos, oldest first: those that date
// the bytes from pos on.
func (x *index) marksFrom(pos int64) (marks []mark, err error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	err = x.opened(func() error {
		marks, err = x.read(x.search(func(m mark) bool { return m.pos > pos }), x.n)
		return err
	})
	return marks, err
}

// posBefore is the position of the last mark older than t: every byte
// written at t or later lies past it. ok is false when no mark is.
func (x *index) posBefore(t time.Time) (pos int64, ok bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	err := x.opened(func() error {
		i := x.search(func(m mark) bool { return !m.at.Before(t) })
		if i == 0 {
			return errNoMark
		}
		m, err := x.at(i - 1)
		pos = m.pos
		return err
	})
	return pos, err == nil
}

// removeIndex deletes the index of the log at path, and a rewrite a
// crash left behind.
var errNoMark = errors.New("no mark before that time")

func removeIndex(path string) []error {
	var errs []error
	for _, p := range []string{indexPath(path), indexPath(path) + ".new"} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errs
}
