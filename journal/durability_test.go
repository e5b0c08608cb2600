package journal

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"go.uber.org/goleak"

	"github.com/flyd-dev/flyd/internal/testenv"
)

// The journal's commits hand on to a goroutine; none may outlive Close.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// failOnce makes the next pass through step fail, and only that one.
func failOnce(t *testing.T, step string) {
	t.Helper()
	failpoint = func(s string) error {
		if s != step {
			return nil
		}
		failpoint = nil
		return fmt.Errorf("injected failure at %s", step)
	}
	t.Cleanup(func() { failpoint = nil })
}

// churn puts 1.5 MiB of changes of one name and deletes it: enough log for
// a compaction, and no record left of it.
func churn(t *testing.T, j *Journal) {
	t.Helper()
	big := strings.Repeat("x", 10<<10)
	for i := range 150 {
		if err := j.Put("churn", record(fmt.Sprint(big, i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Delete("churn"); err != nil {
		t.Fatal(err)
	}
}

// TestFailedPutLeavesNoTrace: a Put refused by a full disk is in no later
// snapshot: after space comes back and the log is compacted, it is not
// there, while the journal goes on taking changes.
func TestFailedPutLeavesNoTrace(t *testing.T) {
	fs := testenv.SmallDisk(t, 8<<20)
	dir := filepath.Join(fs, "j")
	j, _ := mustOpen(t, dir)
	if err := j.Put("kept", record("1")); err != nil {
		t.Fatal(err)
	}
	testenv.FillDisk(t, filepath.Join(fs, "filler"))
	err := j.Put("lost", record(strings.Repeat("y", 64<<10)))
	if err == nil || !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "append") {
		t.Fatalf("Put on a full disk: %v; want an append error with ENOSPC", err)
	}
	if err := os.Remove(filepath.Join(fs, "filler")); err != nil {
		t.Fatal(err)
	}
	churn(t, j)
	if _, err := os.Stat(filepath.Join(dir, snapshotName)); err != nil {
		t.Fatalf("no compaction after 1.5 MiB of log: %v", err)
	}
	if err := j.Put("after", record("1")); err != nil {
		t.Fatal(err)
	}
	j.Close()
	_, recs := mustOpen(t, dir)
	wantRecords(t, recs, map[string]string{"kept": "1", "after": "1"})
}

// TestFailedCompactionKeepsAcknowledged: a compaction that fails at any
// step, even after its snapshot is renamed in (and whether or not a crash
// then undoes the rename), loses no change that was acknowledged, before
// it or after it; a later compaction succeeds and cleans up.
func TestFailedCompactionKeepsAcknowledged(t *testing.T) {
	for _, tc := range []struct {
		step   string
		revert bool // a crash undoes the snapshot's rename
	}{
		{step: "log"},
		{step: "sync"},
		{step: "snapshot"},
		{step: "snapshot synced"},
		{step: "snapshot synced", revert: true},
	} {
		t.Run(fmt.Sprintf("%s/revert=%v", tc.step, tc.revert), func(t *testing.T) {
			dir := t.TempDir()
			var reported []error
			j, _, err := Open(dir, OnError(func(err error) { reported = append(reported, err) }))
			if err != nil {
				t.Fatal(err)
			}
			defer j.Close()
			put := func(name, v string) {
				t.Helper()
				if err := j.Put(name, record(v)); err != nil {
					t.Fatal(err)
				}
			}
			put("a", "1")
			if err := j.Compact(); err != nil {
				t.Fatal(err)
			}
			put("b", "1")
			old, err := os.ReadFile(filepath.Join(dir, snapshotName))
			if err != nil {
				t.Fatal(err)
			}
			failOnce(t, tc.step)
			if err := j.Compact(); err == nil || !strings.Contains(err.Error(), "injected") || !strings.Contains(err.Error(), "compaction") {
				t.Fatalf("Compact: %v; want the injected failure, said to be the compaction's", err)
			}
			put("c", "1")
			if err := j.Delete("a"); err != nil {
				t.Fatal(err)
			}
			j.Close()
			if tc.revert {
				if err := os.WriteFile(filepath.Join(dir, snapshotName), old, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			want := map[string]string{"b": "1", "c": "1"}
			j2, recs := mustOpen(t, dir)
			wantRecords(t, recs, want)

			put2 := func(name string) {
				t.Helper()
				if err := j2.Put(name, record("1")); err != nil {
					t.Fatal(err)
				}
			}
			put2("d")
			if err := j2.Compact(); err != nil {
				t.Fatal(err)
			}
			put2("e")
			j2.Close()
			_, recs = mustOpen(t, dir)
			want["d"], want["e"] = "1", "1"
			wantRecords(t, recs, want)
			if logs := logNames(t, dir); len(logs) != 1 {
				t.Fatalf("logs after a good compaction: %v; want one", logs)
			}
		})
	}
}

// TestCompactionFailureIsReported: a compaction that a change set off
// and that failed is told to OnError, and the change still stands.
func TestCompactionFailureIsReported(t *testing.T) {
	dir := t.TempDir()
	var reported []error
	j, _, err := Open(dir, OnError(func(err error) { reported = append(reported, err) }))
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	failOnce(t, "snapshot")
	churn(t, j)
	if len(reported) != 1 || !strings.Contains(reported[0].Error(), "cannot write the snapshot") {
		t.Fatalf("reported %v; want the one failed compaction", reported)
	}
	if err := j.Put("z", record("1")); err != nil {
		t.Fatal(err)
	}
	j.Close()
	_, recs := mustOpen(t, dir)
	wantRecords(t, recs, map[string]string{"z": "1"})
}

// TestBrokenLogReplaced: an append whose bytes reached the disk but whose
// sync failed, and that could not be cut off again, was never
// acknowledged; the journal refuses changes until it has put a snapshot of
// what was acknowledged in place of that log, and the entry never comes
// back.
func TestBrokenLogReplaced(t *testing.T) {
	dir := t.TempDir()
	j, _ := mustOpen(t, dir)
	if err := j.Put("a", record("1")); err != nil {
		t.Fatal(err)
	}
	failpoint = func(s string) error {
		if s == "append" || s == "cut" || s == "snapshot" {
			return fmt.Errorf("injected failure at %s", s)
		}
		return nil
	}
	t.Cleanup(func() { failpoint = nil })
	if err := j.Put("ghost", record("1")); err == nil {
		t.Fatal("a failed append was acknowledged")
	}
	if err := j.Put("b", record("1")); err == nil || !strings.Contains(err.Error(), "cannot cut the log back") {
		t.Fatalf("a change to a broken journal that cannot be repaired: %v", err)
	}
	failpoint = nil
	if err := j.Put("b", record("1")); err != nil {
		t.Fatalf("once it can be repaired: %v", err)
	}
	j.Close()
	_, recs := mustOpen(t, dir)
	wantRecords(t, recs, map[string]string{"a": "1", "b": "1"})
}

// TestDamagedSnapshotRefused: a snapshot whose bytes changed, that is cut
// short or that lost its records is refused, saying so, and left in place:
// never read as an empty state or as records nobody wrote.
func TestDamagedSnapshotRefused(t *testing.T) {
	for name, damage := range map[string]func([]byte) []byte{
		"a changed byte": func(b []byte) []byte { return bytes.Replace(b, []byte(`"v":"1"`), []byte(`"v":"7"`), 1) },
		"cut short":      func(b []byte) []byte { return b[:len(b)/2] },
		"empty":          func([]byte) []byte { return nil },
		"no records":     func([]byte) []byte { return []byte(`{"seq":1}`) },
		"a bad checksum": func(b []byte) []byte { return bytes.Replace(b, []byte(`"crc32c":"`), []byte(`"crc32c":"x`), 1) },
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			j, _ := mustOpen(t, dir)
			if err := j.Put("a", record("1")); err != nil {
				t.Fatal(err)
			}
			if err := j.Compact(); err != nil {
				t.Fatal(err)
			}
			j.Close()
			path := filepath.Join(dir, snapshotName)
			b, _ := os.ReadFile(path)
			bad := damage(b)
			if bytes.Equal(bad, b) {
				t.Fatalf("the damage changed nothing in %s", b)
			}
			if err := os.WriteFile(path, bad, 0o600); err != nil {
				t.Fatal(err)
			}
			_, recs, err := Open(dir)
			if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), path) {
				t.Fatalf("Open of a damaged snapshot: %v, %v; want ErrDamaged naming the file", recs, err)
			}
			if got, _ := os.ReadFile(path); !bytes.Equal(got, bad) {
				t.Fatal("the damaged snapshot was not left as it was")
			}
		})
	}
}

func logNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var logs []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "log.") {
			logs = append(logs, e.Name())
		}
	}
	return logs
}
