package journal

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/flyd-dev/flyd/atomicfile"
)

// The snapshot is {"seq": S, "crc32c": "C", "records": {name: record}}:
// the contents as of the start of log.S, and C the CRC32C of S and of the
// records' bytes as they stand in the file, so that damage is told from
// an empty state. A snapshot from before checksums has no crc32c and is
// read as it is.
const snapshotName = "snapshot.json"

type snapshotFile struct {
	Seq     uint64          `json:"seq"`
	CRC     *string         `json:"crc32c"`
	Records json.RawMessage `json:"records"`
}

// failpoint, when set by a test, fails the step it names: of a
// compaction ("log", "sync", "snapshot", "snapshot synced"), or of an
// append ("append", once its bytes are synced; "cut").
var failpoint func(step string) error

func fail(step string) error {
	if failpoint == nil {
		return nil
	}
	return failpoint(step)
}

func snapshotSum(seq uint64, records []byte) uint32 {
	h := crc32.New(castagnoli)
	fmt.Fprintf(h, "%d\n", seq)
	h.Write(records)
	return h.Sum32()
}

func encodeSnapshot(seq uint64, recs map[string]json.RawMessage) ([]byte, error) {
	body, err := json.Marshal(recs)
	if err != nil {
		return nil, err
	}
	return fmt.Appendf(nil, `{"seq":%d,"crc32c":"%08x","records":%s}`, seq, snapshotSum(seq, body), body), nil
}

// readSnapshot loads the snapshot, if any, and returns its size.
func (j *Journal) readSnapshot() (int64, error) {
	path := filepath.Join(j.dir, snapshotName)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	damaged := func(why string, a ...any) error {
		return fmt.Errorf("%w: %s %s; it is left as it is (restore it, or move %s aside to start with no workloads)",
			ErrDamaged, path, fmt.Sprintf(why, a...), j.dir)
	}
	var s snapshotFile
	if err := json.Unmarshal(b, &s); err != nil {
		return 0, damaged("is not JSON: %v", err)
	}
	if len(s.Records) == 0 || string(s.Records) == "null" {
		return 0, damaged("holds no records")
	}
	if s.CRC != nil {
		want, err := strconv.ParseUint(*s.CRC, 16, 32)
		if err != nil || len(*s.CRC) != 8 {
			return 0, damaged("has a malformed checksum %q", *s.CRC)
		}
		if got := snapshotSum(s.Seq, s.Records); got != uint32(want) {
			return 0, damaged("fails its checksum (%08x, want %08x)", got, want)
		}
	}
	recs := map[string]json.RawMessage{}
	if err := json.Unmarshal(s.Records, &recs); err != nil {
		return 0, damaged("has records that are not JSON: %v", err)
	}
	j.recs, j.base, j.seq = recs, s.Seq, s.Seq
	return int64(len(b)), nil
}

// Compact folds the logs into a new snapshot now, or repairs a journal
// that a failed write left broken.
func (j *Journal) Compact() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	for j.writing {
		j.cond.Wait()
	}
	switch {
	case j.closed:
		return ErrClosed
	case j.broken != nil:
		return j.repair()
	}
	return j.compact()
}

// compact folds the logs into a new snapshot. Called with mu held and no
// other commit in progress. The new log comes first: once it is durable,
// changes go to it whatever becomes of the snapshot, and the logs before
// it stay until a snapshot holding them is durable. So a failure at any
// step leaves Open the old snapshot with every log since, or the new
// snapshot with the new log; the next attempt waits for the logs to
// double.
func (j *Journal) compact() error {
	err := j.nextLog()
	if err == nil {
		err = j.writeSnapshot(j.seq)
	}
	if err != nil {
		j.compactAt = max(j.compactAt, 2*j.tail)
	}
	return err
}

// repair replaces a broken log, to which nothing may be appended and
// which may end with an entry nobody was told is durable. The snapshot
// comes first here, as seq+1, so that Open ignores that log; then
// log.seq+1 is started. Nothing is appended meanwhile, so a snapshot
// without its log is a whole state. Until both are done the journal stays
// broken.
func (j *Journal) repair() error {
	if j.base <= j.seq { // not done by an earlier attempt
		if err := j.writeSnapshot(j.seq + 1); err != nil {
			return err
		}
	}
	if err := j.nextLog(); err != nil {
		return err
	}
	j.broken = nil
	return nil
}

// nextLog starts log.seq+1, durably, and appends to it from now on.
func (j *Journal) nextLog() error {
	next := j.seq + 1
	path := j.logPath(next)
	err := fail("log")
	var f *os.File
	if err == nil {
		f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	}
	if err == nil {
		if err = fail("sync"); err == nil {
			err = atomicfile.SyncDir(j.dir)
		}
		if err != nil {
			// Never written to: Open would read it as empty anyway.
			f.Close()
			_ = os.Remove(path)
		}
	}
	if err != nil {
		return fmt.Errorf("journal %s: compaction: cannot start log.%d: %w", j.dir, next, err)
	}
	j.log.Close()
	j.log, j.seq, j.logSize = f, next, 0
	return nil
}

// writeSnapshot writes the contents as snapshot seq, which holds every log
// before log.seq, and removes those logs once it is durable. An error
// after the rename leaves either snapshot on disk, and either is right
// with the logs kept.
func (j *Journal) writeSnapshot(seq uint64) error {
	data, err := encodeSnapshot(seq, j.recs)
	if err == nil {
		err = fail("snapshot")
	}
	if err == nil {
		err = atomicfile.Write(filepath.Join(j.dir, snapshotName), data, 0o600)
	}
	if err == nil {
		err = fail("snapshot synced")
	}
	if err != nil {
		return fmt.Errorf("journal %s: compaction: cannot write the snapshot: %w", j.dir, err)
	}
	for s := j.base; s < seq; s++ {
		_ = os.Remove(j.logPath(s)) // or swept by the next Open
	}
	j.base, j.tail = seq, 0
	j.compactAt = max(compactMin, 4*int64(len(data)))
	return nil
}
