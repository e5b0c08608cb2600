package logfile

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Log is one workload's log as the daemon keeps it: the live file, its
// generations and its index (see index.go), rotated, marked and read
// through one value so that a rotation never runs while a reader is
// placing itself. One Log per path: the daemon keeps them by name.
type Log struct {
	path string
	// maxSize changes when the workload's bound does (Book.Bound).
	maxSize     atomic.Int64
	generations int

	// shape is held for writing by a rotation (and Remove) and for
	// reading while a reader resolves positions to files and writes what
	// is already there; following what comes next needs no lock (see
	// Follow). It guards no field; the order of the locks is in the
	// package's doc.
	shape sync.RWMutex
	// names is held while the files' names and the index's base change
	// (a rotation) and while a reader opens the files and reads the base:
	// a renaming rotation needs no more from readers.
	names sync.Mutex

	// amu serialises the daemon's writes (Take, Append); live is the
	// file they write, liveMarks the index's marks of it (-1: to count).
	amu       sync.Mutex
	live      *os.File
	liveMarks int

	// mu guards idx, removed and wake; the index's own lock may be
	// taken under it, names never.
	mu      sync.Mutex
	idx     *index // opened on first use
	removed bool
	wake    chan struct{} // see changed
}

// NewLog is the log at path, rotated at maxSize (DefaultMaxSize when
// <= 0) keeping generations rotated files. It touches no file.
func NewLog(path string, maxSize int64, generations int) *Log {
	if maxSize <= 0 {
		maxSize = DefaultMaxSize
	}
	l := &Log{path: path, generations: generations, liveMarks: -1}
	l.maxSize.Store(maxSize)
	return l
}

// MaxSize is the size the live file is rotated at.
func (l *Log) MaxSize() int64 { return l.maxSize.Load() }

// SetMaxSize has the live file rotated at maxSize (DefaultMaxSize when
// <= 0) from the next write or rotation on.
func (l *Log) SetMaxSize(maxSize int64) {
	if maxSize <= 0 {
		maxSize = DefaultMaxSize
	}
	l.maxSize.Store(maxSize)
}

// Path is the live file's path.
func (l *Log) Path() string { return l.path }

// ErrRemoved is what a use of a log after Remove returns.
var ErrRemoved = errors.New("the log was removed")

func (l *Log) index() (*index, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.removed {
		return nil, ErrRemoved
	}
	if l.idx == nil {
		if err := mkdirAll(filepath.Dir(l.path)); err != nil {
			return nil, err
		}
		x, err := openIndex(l.path)
		if err != nil {
			return nil, err
		}
		if err := l.settle(x); err != nil {
			return nil, err
		}
		l.idx = x
	}
	return l.idx, nil
}

// Mark dates what the live file holds now by its modification time, if
// it grew, and returns its size: for a log its workload writes itself
// (a run of an earlier daemon, a containerd shim), whose bytes no read
// dates. The daemon calls it whenever it looks at such a log.
func (l *Log) Mark() (int64, error) {
	l.amu.Lock()
	l.liveMarks = -1 // Take counts them again
	l.amu.Unlock()
	fi, err := os.Stat(l.path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	x, err := l.index()
	if err != nil {
		return fi.Size(), err
	}
	return fi.Size(), x.add(x.livePos()+fi.Size(), fi.ModTime())
}

// Rotate rotates the live file as RotateHeld does, if it is over the
// size limit, and moves the index's base by what it rotated away. A
// rotation due while a reader is placing itself is left for the next
// call: it reports false then.
func (l *Log) Rotate(hold func() (release func(), err error)) (bool, error) {
	if !l.shape.TryLock() {
		return false, nil
	}
	defer l.shape.Unlock()
	x, err := l.index()
	if err != nil {
		return false, err
	}
	l.amu.Lock()
	l.liveMarks = -1
	l.amu.Unlock()
	l.names.Lock()
	defer l.names.Unlock()
	moved, err := rotate(l.path, l.maxSize.Load(), l.generations, hold)
	if moved < 0 {
		return false, err
	}
	// A crash between the truncate and this rewrite leaves the base
	// behind by one generation: positions then name bytes one generation
	// late, and a reader resuming across it repeats that generation.
	base := x.livePos() + moved
	if _, ok := filePos(l.path); ok {
		_ = unix.Setxattr(l.path, posAttr, []byte(strconv.FormatInt(base, 10)), 0)
	}
	held := int64(0)
	for k := 1; k <= l.generations; k++ {
		if fi, err := os.Stat(genPath(l.path, k)); err == nil {
			held += fi.Size()
		}
	}
	return true, errors.Join(err, x.rebase(base, base-held))
}

// Close closes the live file and the index; a later call opens them
// again.
func (l *Log) Close() error {
	l.amu.Lock()
	lerr := l.closeLive()
	l.amu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.idx == nil {
		return nil
	}
	err := l.idx.close()
	l.idx = nil
	return errors.Join(lerr, err)
}

// Remove deletes the log's files, index included, and refuses every
// later use that would create them again.
func (l *Log) Remove() error {
	l.shape.Lock()
	defer l.shape.Unlock()
	l.amu.Lock()
	defer l.amu.Unlock()
	_ = l.closeLive()
	l.mu.Lock()
	l.removed = true
	if l.idx != nil {
		l.idx.close()
		l.idx = nil
	}
	l.mu.Unlock()
	return Remove(l.path, l.generations)
}

// Query says what of a log to read.
type Query struct {
	// Tail is how many of the last lines to read; < 0 reads every line of
	// the live file, or every line since Since.
	Tail int
	// Since, unless zero, leaves out the lines dated before it.
	Since time.Time
	// From, when set, is the position to read from, as a Record's Pos
	// plus its length: a reader resuming where it stopped. It overrides
	// Tail and Since. A position the log no longer holds reads from the
	// oldest byte it does.
	From *int64
	// Follow goes on with what the workload writes next, until the
	// context is done.
	Follow bool
}

// Record is a piece of a log: one line, ending in a newline, or the
// part of a line that had been written when it was read (the rest comes
// in the next record). Pos is the position of its first byte; Time is
// when it had been written by, at the latest (see index.go). While
// following, a record with no Data marks the end of what the log held
// when reading began: everything after it is new.
type Record struct {
	Pos  int64
	Time time.Time
	Data []byte
}

// Sink receives records. Flush is called whenever what was read at once
// has been given, so a sink that buffers knows when to send.
type Sink interface {
	Record(Record) error
	Flush()
}

// SinkFunc is a Sink that needs no flush.
type SinkFunc func(Record) error

func (f SinkFunc) Record(r Record) error { return f(r) }
func (SinkFunc) Flush()                  {}

// Read gives out the records q selects, oldest first, until they are
// all given or, following, until ctx is done (it then returns nil). out
// must not keep Data past Record's return.
func (l *Log) Read(ctx context.Context, q Query, out Sink) error {
	l.shape.RLock()
	locked := true
	unlock := func() {
		if locked {
			locked = false
			l.shape.RUnlock()
		}
	}
	defer unlock()
	x, err := l.index()
	if err != nil {
		return err
	}
	// Taken before the files are: a write after them wakes the follower.
	var wake <-chan struct{}
	if q.Follow {
		wake = l.changed()
	}
	l.names.Lock()
	st, err := openStream(l.path, l.generations, x.livePos())
	l.names.Unlock()
	if err != nil {
		return err
	}
	defer st.close()
	start, err := st.start(q, x)
	if err != nil {
		return err
	}
	marks, err := x.marksFrom(start)
	if err != nil {
		return err
	}
	rec := &recorder{out: out, pos: start, marks: marks, x: x}
	if err := st.copy(rec, start); err != nil {
		return err
	}
	if q.Follow {
		if err := out.Record(Record{Pos: rec.pos, Time: time.Now()}); err != nil {
			return err
		}
	}
	out.Flush()
	if !q.Follow {
		return nil
	}
	fl := &follower{
		ctx:         ctx,
		w:           rec,
		flush:       out.Flush,
		path:        l.path,
		generations: l.generations,
		interval:    FollowPollInterval,
		buf:         make([]byte, 64<<10),
		changes:     l.changed,
		wake:        wake,
	}
	if err := st.handOver(fl); err != nil {
		return err
	}
	defer fl.closeLive()
	unlock()
	for fl.sleep() {
		if err := fl.poll(); err != nil {
			return err
		}
	}
	return nil
}

// recorder cuts what it is written into records.
type recorder struct {
	out   Sink
	pos   int64
	marks []mark // dating the bytes from pos on
	// x gives the marks past those, once they are used up: what the
	// daemon read after the reader began. A byte no mark dates yet (a
	// log its workload writes itself, between two looks) is dated now.
	x      *index
	looked bool // x was looked at in this Write
}

func (r *recorder) Write(p []byte) (int, error) {
	n := len(p)
	r.looked = false
	for len(p) > 0 {
		line := p
		if i := bytes.IndexByte(p, '\n'); i >= 0 {
			line = p[:i+1]
		}
		end := r.pos + int64(len(line))
		if err := r.out.Record(Record{Pos: r.pos, Time: r.dated(end), Data: line}); err != nil {
			return 0, err
		}
		r.pos, p = end, p[len(line):]
	}
	return n, nil
}

// dated is the time of the first mark at or past end.
func (r *recorder) dated(end int64) time.Time {
	for len(r.marks) > 0 && r.marks[0].pos < end {
		r.marks = r.marks[1:]
	}
	if len(r.marks) == 0 && r.x != nil && !r.looked {
		r.looked = true
		r.marks, _ = r.x.marksFrom(r.pos)
		for len(r.marks) > 0 && r.marks[0].pos < end {
			r.marks = r.marks[1:]
		}
	}
	if len(r.marks) == 0 {
		return time.Now()
	}
	return r.marks[0].at
}

// stream is a log's files as one sequence of positions, opened at once
// under the shape lock: the generations, oldest first, then the live
// file (nil when there is none yet).
type stream struct {
	segs []posSegment
	live *os.File
	// newest is the newest generation, as Follow takes it: what it has
	// already accounted for.
	newest os.FileInfo
}

type posSegment struct {
	segment
	pos int64
}

func openStream(path string, generations int, livePos int64) (*stream, error) {
	st := &stream{}
	live, err := os.Open(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, err
	default:
		st.live = live
	}
	liveSize := int64(0)
	if live != nil {
		fi, err := live.Stat()
		if err != nil {
			live.Close()
			return nil, err
		}
		liveSize = fi.Size()
	}
	pos := livePos
	for k := 1; k <= generations; k++ {
		f, fi, err := openGeneration(path, k)
		if err != nil {
			st.close()
			return nil, err
		}
		if f == nil {
			continue
		}
		if st.newest == nil {
			st.newest = fi
		}
		pos -= fi.Size()
		st.segs = append(st.segs, posSegment{segment{f, fi.Size()}, pos})
	}
	// Oldest first.
	for i, j := 0, len(st.segs)-1; i < j; i, j = i+1, j-1 {
		st.segs[i], st.segs[j] = st.segs[j], st.segs[i]
	}
	st.segs = append(st.segs, posSegment{segment{live, liveSize}, livePos})
	return st, nil
}

func (st *stream) close() {
	for _, s := range st.segs {
		if s.f != nil && s.f != st.live {
			s.f.Close()
		}
	}
	if st.live != nil {
		st.live.Close()
	}
}

func (st *stream) oldest() int64 { return st.segs[0].pos }

func (st *stream) end() int64 {
	last := st.segs[len(st.segs)-1]
	return last.pos + last.size
}

// start is the position q reads from.
func (st *stream) start(q Query, x *index) (int64, error) {
	if q.From != nil {
		if *q.From < st.oldest() || *q.From > st.end() {
			return st.oldest(), nil
		}
		return *q.From, nil
	}
	if q.Tail < 0 && q.Since.IsZero() {
		return st.segs[len(st.segs)-1].pos, nil // the live file
	}
	from := st.oldest()
	if !q.Since.IsZero() {
		if p, ok := x.posBefore(q.Since); ok && p > from {
			var err error
			if from, err = st.lineAfter(p); err != nil {
				return 0, err
			}
		}
	}
	if q.Tail < 0 {
		return from, nil
	}
	tail, err := st.tailStart(q.Tail)
	return max(from, tail), err
}

// lineAfter is pos if a line starts there, else where the next one does.
func (st *stream) lineAfter(pos int64) (int64, error) {
	var b [1]byte
	if err := st.readAt(b[:], pos-1); err != nil || b[0] == '\n' {
		return pos, err
	}
	buf := make([]byte, 32<<10)
	for p := pos; p < st.end(); {
		n := min(int64(len(buf)), st.end()-p)
		if err := st.readAt(buf[:n], p); err != nil {
			return 0, err
		}
		if i := bytes.IndexByte(buf[:n], '\n'); i >= 0 {
			return p + int64(i) + 1, nil
		}
		p += n
	}
	return st.end(), nil
}

// readAt fills b from position pos, across segments if it must.
func (st *stream) readAt(b []byte, pos int64) error {
	for _, s := range st.segs {
		if len(b) == 0 {
			return nil
		}
		if s.f == nil || pos >= s.pos+s.size || pos < s.pos {
			continue
		}
		n := min(int64(len(b)), s.pos+s.size-pos)
		if _, err := s.f.ReadAt(b[:n], pos-s.pos); err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		b, pos = b[n:], pos+n
	}
	return nil
}

// tailStart is the position of the n-th last line.
func (st *stream) tailStart(n int) (int64, error) {
	if n == 0 {
		return st.end(), nil
	}
	s := newLineScanner(n)
	for i := len(st.segs) - 1; i >= 0; i-- {
		found, at, err := s.scan(st.segs[i].segment)
		if err != nil {
			return 0, err
		}
		if found {
			return st.segs[i].pos + at, nil
		}
	}
	return st.oldest(), nil
}

// copy writes everything from pos to the end.
func (st *stream) copy(w io.Writer, pos int64) error {
	buf := make([]byte, 64<<10)
	for _, s := range st.segs {
		if s.f == nil || pos >= s.pos+s.size {
			continue
		}
		from := max(0, pos-s.pos)
		if _, err := io.CopyBuffer(writerOnly{w}, io.NewSectionReader(s.f, from, s.size-from), buf); err != nil {
			return err
		}
	}
	return nil
}

// writerOnly hides a writer's ReadFrom, so that CopyBuffer writes in the
// buffer's pieces.
type writerOnly struct{ io.Writer }

// handOver gives the live file to fl, placed at the end of the stream:
// following goes on exactly from where the stream was written up to.
func (st *stream) handOver(fl *follower) error {
	if st.live == nil {
		return nil
	}
	live := st.segs[len(st.segs)-1]
	last := make([]byte, min(live.size, fingerprintLen))
	if _, err := st.live.ReadAt(last, live.size-int64(len(last))); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	fl.live, fl.off, fl.last, fl.prev = st.live, live.size, last, st.newest
	st.live = nil // fl closes it now
	st.segs[len(st.segs)-1].f = nil
	return nil
}
