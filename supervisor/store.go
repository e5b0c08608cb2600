package supervisor

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/flyd-dev/flyd/api"
	"github.com/flyd-dev/flyd/atomicfile"
	"github.com/flyd-dev/flyd/driver"
	"github.com/flyd-dev/flyd/spec"
)

// specRecord is a workload's desired state, under the state dir. It holds
// secret values, so it is written 0600.
type specRecord struct {
	Spec    *spec.Workload `json:"spec"`
	Running bool           `json:"running"`
	// Owner is the workloads-directory file the spec comes from.
	Owner string `json:"owner,omitempty"`
	// Rest is the state a workload that is not running comes back in
	// (stopped, exited or failed), with the reason it got there.
	Rest      api.State `json:"rest,omitempty"`
	LastError string    `json:"last_error,omitempty"`
}

// runRecord is what a later daemon needs to adopt a live run, under the run
// dir (tmpfs: it means nothing after a reboot).
type runRecord struct {
	Process  driver.State `json:"process"`
	Restarts int          `json:"restarts"`
}

// store keeps one JSON file per workload in two directories.
type store struct {
	specDir string
	runDir  string
}

func newStore(stateDir, runDir string) (*store, error) {
	s := &store{specDir: filepath.Join(stateDir, "workloads"), runDir: filepath.Join(runDir, "workloads")}
	for _, d := range []string{s.specDir, s.runDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func (s *store) saveSpec(r specRecord) error {
	return writeJSONAtomic(filepath.Join(s.specDir, r.Spec.Name+".json"), r)
}

// saveRun writes atomically but does not sync: the run dir is tmpfs, and
// what would make the record lost would also end the run it describes.
func (s *store) saveRun(name string, r runRecord) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return atomicfile.Replace(filepath.Join(s.runDir, name+".json"), b, 0o600)
}

func (s *store) removeSpec(name string) error {
	return removeFile(filepath.Join(s.specDir, name+".json"))
}
func (s *store) removeRun(name string) error {
	return removeFile(filepath.Join(s.runDir, name+".json"))
}

func (s *store) loadRun(name string) (runRecord, bool, error) {
	var r runRecord
	ok, err := readJSON(filepath.Join(s.runDir, name+".json"), &r)
	return r, ok, err
}

// loadSpecs reads every desired-state record. A record that cannot be read
// is reported and skipped: one bad file must not keep the others down.
func (s *store) loadSpecs() (recs []specRecord, bad map[string]error) {
	bad = map[string]error{}
	for _, name := range listJSON(s.specDir) {
		var r specRecord
		path := filepath.Join(s.specDir, name+".json")
		if _, err := readJSON(path, &r); err != nil {
			bad[path] = err
			continue
		}
		if r.Spec == nil || r.Spec.Name != name {
			bad[path] = fmt.Errorf("record does not hold workload %q", name)
			continue
		}
		r.Spec.SetDefaults()
		if err := r.Spec.Validate(); err != nil {
			bad[path] = err
			continue
		}
		recs = append(recs, r)
	}
	return recs, bad
}

// runNames lists the runs recorded in the run dir.
func (s *store) runNames() []string { return listJSON(s.runDir) }

func listJSON(dir string) []string {
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		if n, ok := strings.CutSuffix(e.Name(), ".json"); ok && e.Type().IsRegular() && !strings.HasPrefix(n, ".") {
			names = append(names, n)
		}
	}
	return names
}

func readJSON(path string, v any) (bool, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return false, fmt.Errorf("%s: %w", path, err)
	}
	return true, nil
}

func writeJSONAtomic(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return atomicfile.Write(path, b, 0o600)
}

func removeFile(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
