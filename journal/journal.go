// Package journal keeps a durable map from names to records in one
// directory, for state that changes often and must survive a crash: the
// daemon's desired state (every workload, every document and the file
// that owns it, the projects' leases), under package records.
//
// Changes are appended to a log; Put and Delete return once theirs is on
// disk. Concurrent callers share one write and one sync (group commit):
// the first caller to find no commit in progress writes everything queued
// so far, and the others wait for that write. A burst of N changes, such
// as a batch apply, costs a few syncs instead of N file replacements with
// two syncs each. When the log has grown well past the live data, it is
// compacted into a snapshot and a new log is started.
//
// A change is in the contents only once it is durable: a failed Put or
// Delete leaves no trace, in memory or in a later snapshot.
//
// On disk: snapshot.json (see snapshot.go) and the logs since it, log.S,
// log.S+1, …, whose lines are "CRC32C JSON\n" entries, replayed over the
// snapshot in order. A crash can tear only the last line, which Open
// drops.
package journal

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/flyd-dev/flyd/atomicfile"
)

// ErrClosed is returned by changes after Close.
var ErrClosed = errors.New("journal is closed")

// ErrDamaged is what Open wraps when the files hold something no crash
// of this package leaves: a checksum that does not match, a missing log.
// Open never reads such a journal as empty; its files are left as they are.
var ErrDamaged = errors.New("journal is damaged")

// compactMin is the log size below which the log is never compacted, so
// that small states do not rewrite their snapshot every few changes.
const compactMin = 1 << 20

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Option configures Open.
type Option func(*Journal)

// OnError has f told of each failure the caller of the change that met
// it is not: a compaction that failed, after which the log goes on
// holding every change and a compaction is tried again later. f is
// called with the journal locked, so it must not call the journal; it is
// for logging.
func OnError(f func(error)) Option { return func(j *Journal) { j.onError = f } }

// Journal is a durable map. It is safe for concurrent use.
type Journal struct {
	dir     string
	onError func(error)

	// mu guards every field below, and is cond's lock. The one commit in
	// progress (writing) lets it go while it appends to log and syncs:
	// log and logSize are then the committer's alone, which nobody else
	// changes while writing is set. Nothing else is taken while mu is
	// held.
	mu   sync.Mutex
	cond sync.Cond // signalled when a commit ends
	// recs is the durable contents: a change is applied to it once it is
	// on disk, so that a snapshot never holds one that failed.
	recs    map[string]json.RawMessage
	pending *batch // entries waiting for the next write
	writing bool   // a commit is in progress
	closed  bool
	// broken is set when a failed write could not be undone: the log's
	// end is unknown, so nothing more may be appended to it.
	broken error

	// log is log.seq, the one appended to; base is the snapshot's seq, the
	// first log replayed over it.
	log     *os.File
	seq     uint64
	base    uint64
	logSize int64
	// tail is the size of every log since the snapshot; past compactAt, it
	// is compacted.
	tail      int64
	compactAt int64
	// commits counts the writes of the log, each with its sync.
	commits uint64
}

// batch is the entries one write puts on disk, and what its callers wait
// for.
type batch struct {
	buf     []byte
	entries []entry // applied to recs once buf is on disk
	done    chan struct{}
	err     error
}

// entry is one change in the log.
type entry struct {
	Name   string          `json:"name"`
	Record json.RawMessage `json:"record,omitempty"`
	Delete bool            `json:"delete,omitempty"`
}

// Open opens (or creates, 0700) the journal in dir and returns its
// contents: the snapshot with the logs since replayed over it. A torn
// last line is dropped; a damaged line before the last is an error, since
// the changes after it cannot be trusted to apply in order, and so is a
// damaged snapshot (ErrDamaged).
func Open(dir string, opts ...Option) (*Journal, map[string][]byte, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, err
	}
	j := &Journal{dir: dir, recs: map[string]json.RawMessage{}}
	j.cond.L = &j.mu
	for _, o := range opts {
		o(j)
	}
	snapSize, err := j.readSnapshot()
	if err != nil {
		return nil, nil, err
	}
	if err := j.replay(); err != nil {
		return nil, nil, err
	}
	// The log may have just been created: the first change acknowledged
	// must not lose its file to a crash.
	if err := atomicfile.SyncDir(dir); err != nil {
		j.log.Close()
		return nil, nil, err
	}
	_ = atomicfile.SyncDir(filepath.Dir(dir))
	j.compactAt = max(compactMin, 4*snapSize)
	j.sweep()
	out := make(map[string][]byte, len(j.recs))
	for k, v := range j.recs {
		out[k] = bytes.Clone(v)
	}
	return j, out, nil
}

// replay applies the logs since the snapshot in order, and leaves the
// last one open for appending, cut after its last whole entry. An earlier
// log can end with a torn line only where a write failed, unacknowledged,
// and the journal then started a new log: that line is dropped too.
func (j *Journal) replay() error {
	seqs := j.logsFrom(j.base)
	if len(seqs) == 0 {
		seqs = []uint64{j.base}
	}
	for i, seq := range seqs {
		if seq != j.base+uint64(i) {
			return fmt.Errorf("%w: journal %s: log.%d is missing, and log.%d follows it", ErrDamaged, j.dir, j.base+uint64(i), seq)
		}
	}
	for i, seq := range seqs {
		path := j.logPath(seq)
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return err
		}
		last := i == len(seqs)-1
		good, err := j.apply(f)
		if err == nil && last {
			err = j.cut(f, good)
		}
		if err != nil {
			f.Close()
			return fmt.Errorf("journal %s: %w", path, err)
		}
		j.tail += good
		if !last {
			f.Close()
			continue
		}
		j.log, j.seq, j.logSize = f, seq, good
	}
	return nil
}

// logsFrom lists the seqs of the logs from seq on, in order.
func (j *Journal) logsFrom(seq uint64) []uint64 {
	entries, _ := os.ReadDir(j.dir)
	var seqs []uint64
	for _, e := range entries {
		if n, ok := logSeq(e.Name()); ok && n >= seq {
			seqs = append(seqs, n)
		}
	}
	slices.Sort(seqs)
	return seqs
}

func logSeq(name string) (uint64, bool) {
	s, ok := strings.CutPrefix(name, "log.")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseUint(s, 10, 64)
	return n, err == nil
}

// apply replays the entries of r into recs and returns the length of the
// whole entries read.
func (j *Journal) apply(r io.Reader) (int64, error) {
	br := bufio.NewReader(r)
	var good int64
	for {
		line, err := br.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			return good, nil // nothing, or a torn last line
		}
		if err != nil {
			return good, err
		}
		e, derr := decodeEntry(line)
		if derr != nil {
			if _, err := br.Peek(1); errors.Is(err, io.EOF) {
				return good, nil // the last line, torn by a crash
			}
			return good, fmt.Errorf("%w: damaged entry at byte %d: %w", ErrDamaged, good, derr)
		}
		if e.Delete {
			delete(j.recs, e.Name)
		} else {
			j.recs[e.Name] = e.Record
		}
		good += int64(len(line))
	}
}

// cut truncates the log after its last whole entry, durably.
func (j *Journal) cut(f *os.File, size int64) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if fi.Size() == size {
		_, err = f.Seek(size, io.SeekStart)
		return err
	}
	if err := f.Truncate(size); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	_, err = f.Seek(size, io.SeekStart)
	return err
}

// sweep removes the logs the snapshot holds and the temporary files of a
// crashed snapshot write.
func (j *Journal) sweep() {
	entries, _ := os.ReadDir(j.dir)
	for _, e := range entries {
		n := e.Name()
		if seq, ok := logSeq(n); ok && seq < j.base || atomicfile.IsTemp(n) {
			_ = os.Remove(filepath.Join(j.dir, n))
		}
	}
}

func (j *Journal) logPath(seq uint64) string {
	return filepath.Join(j.dir, "log."+strconv.FormatUint(seq, 10))
}

// encodeEntry appends e's line: the bytes json.Marshal gives an entry
// whose record is compact, written without reflection. Every record is
// compact here: Put and PutAll compact what they are given.
func encodeEntry(buf []byte, e entry) ([]byte, error) {
	start := len(buf)
	buf = append(buf, "00000000 "...)
	body := len(buf)
	buf = append(buf, `{"name":`...)
	buf = appendString(buf, e.Name)
	if len(e.Record) > 0 {
		buf = append(buf, `,"record":`...)
		buf = append(buf, e.Record...)
	}
	if e.Delete {
		buf = append(buf, `,"delete":true`...)
	}
	buf = append(buf, '}')
	const hex = "0123456789abcdef"
	sum := crc32.Checksum(buf[body:], castagnoli)
	for i := 7; i >= 0; i-- {
		buf[start+i] = hex[sum&0xf]
		sum >>= 4
	}
	return append(buf, '\n'), nil
}

// appendString is a string's JSON as json.Marshal writes it: printable
// ASCII that needs no escape as it is, any other through json.Marshal.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			out, _ := json.Marshal(s)
			return append(b, out...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

func decodeEntry(line []byte) (entry, error) {
	var e entry
	line = bytes.TrimSuffix(line, []byte("\n"))
	sum, body, ok := bytes.Cut(line, []byte(" "))
	if !ok || len(sum) != 8 {
		return e, errors.New("no checksum")
	}
	want, err := strconv.ParseUint(string(sum), 16, 32)
	if err != nil || uint32(want) != crc32.Checksum(body, castagnoli) {
		return e, errors.New("checksum mismatch")
	}
	if err := json.Unmarshal(body, &e); err != nil {
		return e, err
	}
	if e.Name == "" || (!e.Delete && len(e.Record) == 0) {
		return e, errors.New("entry without name or record")
	}
	return e, nil
}

// Put sets name's record (JSON) and returns once the change is durable.
func (j *Journal) Put(name string, record []byte) error {
	return j.PutAll([]Change{{Name: name, Record: record}})
}

// Delete removes name's record, if any, and returns once that is durable.
func (j *Journal) Delete(name string) error {
	return j.PutAll([]Change{{Name: name, Delete: true}})
}

// Change is one change of PutAll: name's record set, or with Delete
// removed.
type Change struct {
	Name   string
	Record []byte
	Delete bool
	// Owned gives the journal Record itself when it is compact: the
	// caller never changes it again (and may keep reading it). Otherwise
	// the journal keeps a compact copy.
	Owned bool
}

// PutAll makes changes, in order, in one write of the log, and returns
// once they are durable. A record that is not JSON refuses them all
// before any is made. A crash during the write keeps a prefix of them:
// each is whole or absent, as a Put's.
func (j *Journal) PutAll(changes []Change) error {
	es := make([]entry, len(changes))
	for i, c := range changes {
		if c.Name == "" {
			return errors.New("journal: a change without a name")
		}
		es[i] = entry{Name: c.Name, Delete: c.Delete}
		if c.Delete {
			continue
		}
		if c.Owned && compact(c.Record) && json.Valid(c.Record) {
			es[i].Record = c.Record
			continue
		}
		// One scan validates the record and makes it the one line it
		// must be in the log; the result is the journal's own copy.
		var buf bytes.Buffer
		buf.Grow(len(c.Record))
		if err := json.Compact(&buf, c.Record); err != nil {
			return fmt.Errorf("journal: the record of %q is not JSON", c.Name)
		}
		es[i].Record = buf.Bytes()
	}
	return j.change(es)
}

// compact says whether b, if it is JSON, has no whitespace outside its
// strings: what json.Compact would leave as it is.
func compact(b []byte) bool {
	in, esc := false, false
	for _, c := range b {
		switch {
		case esc:
			esc = false
		case in && c == '\\':
			esc = true
		case c == '"':
			in = !in
		case !in && (c == ' ' || c == '\t' || c == '\n' || c == '\r'):
			return false
		}
	}
	return true
}

func (j *Journal) change(es []entry) error {
	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		return ErrClosed
	}
	if j.broken != nil {
		err := j.broken
		if !j.writing {
			if rerr := j.repair(); rerr == nil {
				err = nil
			} else {
				err = fmt.Errorf("%w; and cannot replace the log: %v", err, rerr)
			}
		}
		if err != nil {
			j.mu.Unlock()
			return err
		}
	}
	if j.pending == nil {
		j.pending = &batch{done: make(chan struct{})}
	}
	b := j.pending
	size := 0
	for _, e := range es {
		size += len(e.Name) + len(e.Record) + 48
	}
	b.buf = slices.Grow(b.buf, size)
	for _, e := range es {
		b.buf, _ = encodeEntry(b.buf, e)
	}
	b.entries = append(b.entries, es...)
	if !j.writing {
		j.commit(b)
	}
	j.mu.Unlock()
	<-b.done
	return b.err
}

// commit writes the pending batches, one write and one sync each. Called
// with mu held by the caller that found no commit in progress; mu is
// released while writing, so that others can queue. Once the caller's own
// batch (mine) is written, a goroutine carries on with what queued
// meanwhile, so that the caller is not held up by everyone after it; with
// mine nil it writes until nothing is pending.
func (j *Journal) commit(mine *batch) {
	j.writing = true
	for j.pending != nil {
		b := j.pending
		j.pending = nil
		if j.broken != nil {
			b.err = j.broken
			close(b.done)
			continue
		}
		j.mu.Unlock()
		b.err = j.write(b.buf)
		j.mu.Lock()
		j.commits++
		if b.err == nil {
			j.applyEntries(b.entries)
			j.logSize += int64(len(b.buf))
			j.tail += int64(len(b.buf))
			if j.tail >= j.compactAt {
				if err := j.compact(); err != nil && j.onError != nil {
					j.onError(err)
				}
			}
		}
		close(b.done)
		if b == mine && j.pending != nil {
			go func() {
				j.mu.Lock()
				defer j.mu.Unlock()
				j.commit(nil)
			}()
			return
		}
	}
	j.writing = false
	j.cond.Broadcast()
}

// applyEntries makes durable changes part of the contents, in order.
func (j *Journal) applyEntries(es []entry) {
	for _, e := range es {
		if e.Delete {
			delete(j.recs, e.Name)
		} else {
			j.recs[e.Name] = e.Record
		}
	}
}

// write appends buf to the log and syncs it. A failed write is cut off
// again, so that the log keeps ending with a whole entry; if that fails
// too, the journal is broken until repair replaces the log.
func (j *Journal) write(buf []byte) error {
	_, err := j.log.Write(buf)
	if err == nil {
		if err = unix.Fdatasync(int(j.log.Fd())); err == nil {
			if err = fail("append"); err == nil {
				return nil
			}
		}
	}
	err = fmt.Errorf("journal %s: append: %w", j.dir, err)
	// logSize changes only under a commit, and this is the one.
	cerr := fail("cut")
	if cerr == nil {
		cerr = j.cut(j.log, j.logSize)
	}
	if cerr != nil {
		j.mu.Lock()
		j.broken = fmt.Errorf("%w; and cannot cut the log back: %w", err, cerr)
		j.mu.Unlock()
	}
	return err
}

// Commits is how many writes of the log, each with its sync, were made
// since Open.
func (j *Journal) Commits() uint64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.commits
}

// Close waits for a commit in progress and closes the log. Changes after
// Close fail with ErrClosed.
func (j *Journal) Close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	for j.writing {
		j.cond.Wait()
	}
	if j.closed {
		return nil
	}
	j.closed = true
	return j.log.Close()
}
