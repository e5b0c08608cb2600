// Package journal keeps a durable map from names to records in one
// directory, for state that changes often and must survive a crash: the
// daemon's desired state of every workload.
//
// Changes are appended to a log; Put and Delete return once theirs is on
// disk. Concurrent callers share one write and one sync (group commit):
// the first caller to find no commit in progress writes everything queued
// so far, and the others wait for that write. A burst of N changes, such
// as a batch apply, costs a few syncs instead of N file replacements with
// two syncs each. When the log has grown well past the live data, it is
// compacted into a snapshot and a new log is started.
//
// On disk: snapshot.json ({"seq": S, "records": {name: record}}) and
// log.S, whose lines are "CRC32C JSON\n" entries. A crash can tear only
// the last line, which Open drops.
package journal

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/flyd-dev/flyd/atomicfile"
)

// ErrClosed is returned by changes after Close.
var ErrClosed = errors.New("journal is closed")

// compactMin is the log size below which the log is never compacted, so
// that small states do not rewrite their snapshot every few changes.
const compactMin = 1 << 20

const snapshotName = "snapshot.json"

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Journal is a durable map. It is safe for concurrent use.
type Journal struct {
	dir string

	mu      sync.Mutex
	cond    sync.Cond                  // signalled when a commit ends
	recs    map[string]json.RawMessage // the current contents
	pending *batch                     // entries waiting for the next write
	writing bool                       // a commit is in progress
	closed  bool
	// broken is set when a failed write could not be undone: the log's
	// end is unknown, so nothing more may be appended to it.
	broken error

	log       *os.File
	seq       uint64
	logSize   int64
	compactAt int64
}

// batch is the entries one write puts on disk, and what its callers wait
// for.
type batch struct {
	buf  []byte
	done chan struct{}
	err  error
}

// entry is one change in the log.
type entry struct {
	Name   string          `json:"name"`
	Record json.RawMessage `json:"record,omitempty"`
	Delete bool            `json:"delete,omitempty"`
}

type snapshot struct {
	Seq     uint64                     `json:"seq"`
	Records map[string]json.RawMessage `json:"records"`
}

// Open opens (or creates, 0700) the journal in dir and returns its
// contents: the snapshot with the log replayed over it. A torn last line
// is dropped; a damaged line before the last is an error, since the
// changes after it cannot be trusted to apply in order.
func Open(dir string) (*Journal, map[string][]byte, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, err
	}
	j := &Journal{dir: dir, recs: map[string]json.RawMessage{}}
	j.cond.L = &j.mu
	snapSize, err := j.readSnapshot()
	if err != nil {
		return nil, nil, err
	}
	if err := j.replay(); err != nil {
		return nil, nil, err
	}
	j.compactAt = max(compactMin, 4*snapSize)
	j.sweep()
	out := make(map[string][]byte, len(j.recs))
	for k, v := range j.recs {
		out[k] = bytes.Clone(v)
	}
	return j, out, nil
}

func (j *Journal) readSnapshot() (int64, error) {
	b, err := os.ReadFile(filepath.Join(j.dir, snapshotName))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	var s snapshot
	if err := json.Unmarshal(b, &s); err != nil {
		return 0, fmt.Errorf("journal %s: snapshot: %w", j.dir, err)
	}
	j.seq = s.Seq
	if s.Records != nil {
		j.recs = s.Records
	}
	return int64(len(b)), nil
}

// replay applies log.seq and leaves it open for appending, cut after its
// last whole entry.
func (j *Journal) replay() error {
	path := j.logPath(j.seq)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	good, err := j.apply(f)
	if err == nil {
		err = j.cut(f, good)
	}
	if err != nil {
		f.Close()
		return fmt.Errorf("journal %s: %w", path, err)
	}
	j.log, j.logSize = f, good
	return nil
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
			return good, fmt.Errorf("damaged entry at byte %d: %w", good, derr)
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

// sweep removes the logs of older snapshots and the temporary files of a
// crashed snapshot write.
func (j *Journal) sweep() {
	entries, _ := os.ReadDir(j.dir)
	for _, e := range entries {
		n := e.Name()
		if seq, ok := strings.CutPrefix(n, "log."); ok && seq != strconv.FormatUint(j.seq, 10) || atomicfile.IsTemp(n) {
			_ = os.Remove(filepath.Join(j.dir, n))
		}
	}
}

func (j *Journal) logPath(seq uint64) string {
	return filepath.Join(j.dir, "log."+strconv.FormatUint(seq, 10))
}

func encodeEntry(buf []byte, e entry) ([]byte, error) {
	b, err := json.Marshal(e)
	if err != nil {
		return buf, err
	}
	buf = fmt.Appendf(buf, "%08x ", crc32.Checksum(b, castagnoli))
	buf = append(buf, b...)
	return append(buf, '\n'), nil
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
	if !json.Valid(record) {
		return fmt.Errorf("journal: the record of %q is not JSON", name)
	}
	return j.change(entry{Name: name, Record: bytes.Clone(record)})
}

// Delete removes name's record, if any, and returns once that is durable.
func (j *Journal) Delete(name string) error {
	return j.change(entry{Name: name, Delete: true})
}

func (j *Journal) change(e entry) error {
	j.mu.Lock()
	switch {
	case j.closed:
		j.mu.Unlock()
		return ErrClosed
	case j.broken != nil:
		j.mu.Unlock()
		return j.broken
	}
	if j.pending == nil {
		j.pending = &batch{done: make(chan struct{})}
	}
	b := j.pending
	var err error
	if b.buf, err = encodeEntry(b.buf, e); err != nil {
		j.mu.Unlock()
		return err
	}
	if e.Delete {
		delete(j.recs, e.Name)
	} else {
		j.recs[e.Name] = e.Record
	}
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
		if b.err == nil {
			// A failed batch's records stay in memory, and reach the disk
			// with the next snapshot.
			j.logSize += int64(len(b.buf))
			if j.logSize >= j.compactAt {
				j.compact()
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

// write appends buf to the log and syncs it. A failed write is cut off
// again, so that the log keeps ending with a whole entry; if that fails
// too, the journal is broken.
func (j *Journal) write(buf []byte) error {
	_, err := j.log.Write(buf)
	if err == nil {
		if err = unix.Fdatasync(int(j.log.Fd())); err == nil {
			return nil
		}
	}
	err = fmt.Errorf("journal %s: append: %w", j.dir, err)
	// logSize changes only under a commit, and this is the one.
	if cerr := j.cut(j.log, j.logSize); cerr != nil {
		j.mu.Lock()
		j.broken = fmt.Errorf("%w; and cannot cut the log back: %w", err, cerr)
		j.mu.Unlock()
	}
	return err
}

// compact writes the contents as snapshot seq+1 and starts log.seq+1.
// Called with mu held and no commit in progress. A failure leaves the
// current log in use, and the next attempt waits for it to double.
func (j *Journal) compact() {
	data, err := json.Marshal(snapshot{Seq: j.seq + 1, Records: j.recs})
	if err == nil {
		err = atomicfile.Write(filepath.Join(j.dir, snapshotName), data, 0o600)
	}
	var next *os.File
	if err == nil {
		next, err = os.OpenFile(j.logPath(j.seq+1), os.O_RDWR|os.O_CREATE|os.O_TRUNC|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	}
	if err == nil {
		err = atomicfile.SyncDir(j.dir)
	}
	if err != nil {
		if next != nil {
			next.Close()
		}
		// Snapshot seq+1 may be on disk without its log: Open then starts
		// an empty one, which is right, since the snapshot holds it all.
		j.compactAt = 2 * j.logSize
		return
	}
	old := j.seq
	j.log.Close()
	j.log, j.seq, j.logSize = next, j.seq+1, 0
	j.compactAt = max(compactMin, 4*int64(len(data)))
	_ = os.Remove(j.logPath(old))
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
