package journal

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func mustOpen(t *testing.T, dir string) (*Journal, map[string][]byte) {
	t.Helper()
	j, recs, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	return j, recs
}

func record(v string) []byte { b, _ := json.Marshal(map[string]string{"v": v}); return b }

func wantRecords(t *testing.T, got map[string][]byte, want map[string]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d records %v, want %d %v", len(got), keys(got), len(want), want)
	}
	for k, v := range want {
		if !bytes.Equal(got[k], record(v)) {
			t.Fatalf("record %s = %s, want %s", k, got[k], record(v))
		}
	}
}

func keys(m map[string][]byte) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

func TestPutDeleteSurviveReopen(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "j")
	j, recs := mustOpen(t, dir)
	if len(recs) != 0 {
		t.Fatalf("a new journal holds %v", keys(recs))
	}
	for _, op := range []struct{ name, v string }{{"a", "1"}, {"b", "1"}, {"a", "2"}, {"c", "1"}, {"b", ""}} {
		var err error
		if op.v == "" {
			err = j.Delete(op.name)
		} else {
			err = j.Put(op.name, record(op.v))
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	j.Close()
	if err := j.Put("late", record("x")); !errors.Is(err, ErrClosed) {
		t.Fatalf("Put after Close: %v, want ErrClosed", err)
	}
	_, recs = mustOpen(t, dir)
	wantRecords(t, recs, map[string]string{"a": "2", "c": "1"})
	for _, p := range []string{dir, filepath.Join(dir, "log.0")} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm()&0o077 != 0 {
			t.Fatalf("%s: %v, mode %v; want no access for group or others", p, err, fi.Mode())
		}
	}
	if err := j.Put("x", []byte("{not json")); err == nil {
		t.Fatal("Put of a record that is not JSON succeeded")
	}
}

// TestConcurrentChangesAllLand: many writers at once share commits, and
// each one's change is on disk when its call returns.
func TestConcurrentChangesAllLand(t *testing.T) {
	dir := t.TempDir()
	j, _ := mustOpen(t, dir)
	const n = 200
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if err := j.Put(fmt.Sprintf("w%d", i), record("on")); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	want := map[string]string{}
	for i := range n {
		want[fmt.Sprintf("w%d", i)] = "on"
	}
	_, recs := mustOpen(t, dir) // a second reader sees what was acknowledged
	wantRecords(t, recs, want)
}

// TestTornLastLineDropped: a crash in the middle of an append leaves a
// partial last line, which Open drops and cuts off so appends go on.
func TestTornLastLineDropped(t *testing.T) {
	dir := t.TempDir()
	j, _ := mustOpen(t, dir)
	if err := j.Put("a", record("1")); err != nil {
		t.Fatal(err)
	}
	j.Close()
	log := filepath.Join(dir, "log.0")
	whole, _ := os.ReadFile(log)
	torn, _ := encodeEntry(nil, entry{Name: "b", Record: record("1")})
	appendFile(t, log, torn[:len(torn)/2])

	j, recs := mustOpen(t, dir)
	wantRecords(t, recs, map[string]string{"a": "1"})
	if got, _ := os.ReadFile(log); !bytes.Equal(got, whole) {
		t.Fatalf("the torn line was not cut off: %q", got)
	}
	if err := j.Put("c", record("1")); err != nil {
		t.Fatal(err)
	}
	j.Close()
	_, recs = mustOpen(t, dir)
	wantRecords(t, recs, map[string]string{"a": "1", "c": "1"})
}

// TestDamagedEntryRefused: a bad line with whole lines after it is not a
// crash's doing, and skipping it could apply later changes out of order.
func TestDamagedEntryRefused(t *testing.T) {
	dir := t.TempDir()
	j, _ := mustOpen(t, dir)
	for _, n := range []string{"a", "b"} {
		if err := j.Put(n, record("1")); err != nil {
			t.Fatal(err)
		}
	}
	j.Close()
	log := filepath.Join(dir, "log.0")
	b, _ := os.ReadFile(log)
	b[12] ^= 0x20 // a byte of the first entry's JSON
	if err := os.WriteFile(log, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Open(dir); err == nil || !strings.Contains(err.Error(), "damaged entry") {
		t.Fatalf("Open of a damaged log: %v, want a damaged entry error", err)
	}
}

// TestCompaction: a log grown past the live data becomes a snapshot and a
// new log; the old log goes, and the contents are unchanged.
func TestCompaction(t *testing.T) {
	dir := t.TempDir()
	j, _ := mustOpen(t, dir)
	big := strings.Repeat("x", 10<<10)
	for i := range 150 { // 1.5 MiB of log for one live record
		if err := j.Put("a", record(fmt.Sprint(big, i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Put("b", record("1")); err != nil {
		t.Fatal(err)
	}
	j.Close()
	if _, err := os.Stat(filepath.Join(dir, snapshotName)); err != nil {
		t.Fatalf("no snapshot after 1.5 MiB of log: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "log.0")); err == nil {
		t.Fatal("the log the snapshot replaced is still there")
	}
	_, recs := mustOpen(t, dir)
	wantRecords(t, recs, map[string]string{"a": fmt.Sprint(big, 149), "b": "1"})
}

// TestCrashDuringCompaction: the new snapshot is on disk but its log was
// never made and the old one is still there; Open trusts the snapshot.
func TestCrashDuringCompaction(t *testing.T) {
	dir := t.TempDir()
	j, _ := mustOpen(t, dir)
	if err := j.Put("a", record("old")); err != nil {
		t.Fatal(err)
	}
	j.Close()
	// Written as a daemon from before snapshot checksums did, which must
	// still be read.
	snap := fmt.Appendf(nil, `{"seq":1,"records":{"a":%s}}`, record("new"))
	if err := os.WriteFile(filepath.Join(dir, snapshotName), snap, 0o600); err != nil {
		t.Fatal(err)
	}
	appendFile(t, filepath.Join(dir, ".snapshot.json.tmp-123"), []byte("{"))
	_, recs := mustOpen(t, dir)
	wantRecords(t, recs, map[string]string{"a": "new"})
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if strings.Join(names, " ") != "log.1 snapshot.json" {
		t.Fatalf("files after Open: %v; want the new log and the snapshot only", names)
	}
}

func appendFile(t *testing.T, path string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
}

// TestEntryEncoding: a line is the checksum and json.Marshal's bytes of
// its entry, names that need escaping included, and PutAll's changes are
// stored compact, in order, and read back after a reopen.
func TestEntryEncoding(t *testing.T) {
	for _, e := range []entry{
		{Name: "web", Record: json.RawMessage(`{"a":1}`)},
		{Name: "network/x<y>&\"z\"\\", Record: json.RawMessage(`[1,"\u003c"]`)},
		{Name: "ünïcode\x01", Delete: true},
	} {
		want, _ := json.Marshal(e)
		want = append(fmt.Appendf(nil, "%08x ", crc32.Checksum(want, castagnoli)), want...)
		got, _ := encodeEntry(nil, e)
		if string(got) != string(want)+"\n" {
			t.Errorf("encoded %q, want %q", got, want)
		}
	}
	dir := t.TempDir()
	j, _, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.PutAll([]Change{{Name: "a", Record: []byte("{\n  \"x\": 1\n}")}, {Name: "b", Record: []byte(`2`)}, {Name: "a", Delete: true}, {Name: "c", Record: []byte(`"c"`)}}); err != nil {
		t.Fatal(err)
	}
	if err := j.PutAll([]Change{{Name: "d", Record: []byte(`1`)}, {Name: "e", Record: []byte(`{`)}}); err == nil {
		t.Error("PutAll took a record that is not JSON")
	}
	j.Close()
	_, recs, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || string(recs["b"]) != "2" || string(recs["c"]) != `"c"` {
		t.Errorf("reopened: %q", recs)
	}
}

// TestOwnedRecordIsKeptAsGiven: a record given to the journal (Owned)
// is kept itself when compact, and as a compact copy when it is not;
// compact tells whitespace in strings from whitespace between values.
func TestOwnedRecordIsKeptAsGiven(t *testing.T) {
	j, _ := mustOpen(t, t.TempDir())
	defer j.Close()
	tight := []byte(`{"a":"x y\"z \\","b":[1,2]}`)
	loose := []byte(`{"a": 1}`)
	if err := j.PutAll([]Change{{Name: "tight", Record: tight, Owned: true}, {Name: "loose", Record: loose, Owned: true}}); err != nil {
		t.Fatal(err)
	}
	j.mu.Lock()
	kept, copied := j.recs["tight"], j.recs["loose"]
	j.mu.Unlock()
	if &kept[0] != &tight[0] {
		t.Error("a compact owned record was copied")
	}
	if string(copied) != `{"a":1}` {
		t.Errorf("a loose owned record was kept as %q", copied)
	}
	for s, want := range map[string]bool{`{"a":"x y"}`: true, `{"a": 1}`: false, `["\" ",1]`: true, "[1,\n2]": false, `"\\" `: false} {
		if got := compact([]byte(s)); got != want {
			t.Errorf("compact(%q) = %v, want %v", s, got, want)
		}
	}
}
