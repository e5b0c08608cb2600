package carriers

import (
	crand "crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
)

// Root is the directory that holds a directory of file carriers per run.
type Root struct{ dir string }

// OpenRoot makes dir the carrier root, if it is not there yet: mode 0711,
// so that a workload's user reaches its own run's directory, by name, and
// lists nothing.
func OpenRoot(dir string) (Root, error) {
	return Root{dir}, os.MkdirAll(dir, 0o711)
}

// Dir is a fresh directory for one run of workload, not made yet (the
// runtime writes it: Write). Its nonce keeps a new run from ever meeting
// an old run's files.
func (r Root) Dir(workload string) string {
	var b [8]byte
	_, _ = crand.Read(b[:])
	return filepath.Join(r.dir, workload+"."+hex.EncodeToString(b[:]))
}

// Sweep removes every run's directory but those of kept, the directories
// of the runs that live on, as Dir gave them; warn hears of each that
// cannot be removed.
func (r Root) Sweep(kept []string, warn func(dir string, err error)) {
	keep := make(map[string]bool, len(kept))
	for _, d := range kept {
		keep[filepath.Base(d)] = true
	}
	entries, _ := os.ReadDir(r.dir)
	for _, e := range entries {
		if keep[e.Name()] {
			continue
		}
		if err := Remove(filepath.Join(r.dir, e.Name())); err != nil {
			warn(e.Name(), err)
		}
	}
}
