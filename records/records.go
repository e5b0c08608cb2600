// Package records keeps what the supervisor must find again after a
// restart: each workload's desired state and every document (network,
// policy, workspace, owner, a project's lease) in one journal under the
// state dir, durable with group commit, and one record per live run under
// the run dir, for a later daemon to adopt it (RecoverRuns); and the
// quarantine of the workload records that do not load (Quarantine). It
// says nothing of what a record means: that is the supervisor's, the
// network plane's for its documents and package project's for leases.
package records

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/atomicfile"
	"github.com/flyd-dev/flyd/driver"
	"github.com/flyd-dev/flyd/events"
	"github.com/flyd-dev/flyd/internal/par"
	"github.com/flyd-dev/flyd/journal"
	"github.com/flyd-dev/flyd/runhook"
	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/status"
)

// Workload is a workload's desired state, under the state dir. It holds
// secret values, so it is written 0600.
type Workload struct {
	Spec    *spec.Workload `json:"spec"`
	Running bool           `json:"running"`
	// Owner is the workloads-directory file the spec comes from.
	Owner string `json:"owner,omitempty"`
	// By is the uid of the caller that applied it.
	By uint32 `json:"by,omitempty"`
	// Rest is the state a workload that is not running comes back in
	// (stopped, exited or failed), with the reason it got there.
	Rest      status.State `json:"rest,omitempty"`
	LastError string       `json:"last_error,omitempty"`
	// Reason, StartedAt (its last run's start), LastExit and Restarts
	// are the rest of what `inspect` shows of a workload at rest: a
	// daemon restart keeps them, and a one-shot that completed is still
	// complete for what waits on it.
	Reason    string             `json:"reason,omitempty"`
	StartedAt *time.Time         `json:"started_at,omitempty"`
	LastExit  *events.ExitRecord `json:"last_exit,omitempty"`
	Restarts  int                `json:"restarts,omitempty"`
	// ScheduledThrough, set while the workload's schedule is armed, is
	// the instant up to which its times were handled.
	ScheduledThrough *time.Time `json:"scheduled_through,omitempty"`
}

// Run is what a later daemon needs to adopt a live run, under the run
// dir (tmpfs: it means nothing after a reboot).
type Run struct {
	Process  driver.State `json:"process"`
	Restarts int          `json:"restarts"`
	// Kept is what the run's hooks keep of it, each field beside the
	// record's own (health's ready and log_from, logpipe's log_pipe), as
	// every daemon has written them.
	Kept runhook.Kept `json:"-"`
}

// MarshalJSON writes the record's own fields and the hooks' beside them.
func (r Run) MarshalJSON() ([]byte, error) {
	m := make(map[string]any, len(r.Kept)+2)
	for k, v := range r.Kept {
		m[k] = v
	}
	m["process"], m["restarts"] = r.Process, r.Restarts
	return json.Marshal(m)
}

// UnmarshalJSON reads the record's own fields; every other is a hook's.
func (r *Run) UnmarshalJSON(b []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	*r = Run{}
	if p, ok := m["process"]; ok {
		if err := json.Unmarshal(p, &r.Process); err != nil {
			return fmt.Errorf("process: %w", err)
		}
	}
	if n, ok := m["restarts"]; ok {
		if err := json.Unmarshal(n, &r.Restarts); err != nil {
			return fmt.Errorf("restarts: %w", err)
		}
	}
	delete(m, "process")
	delete(m, "restarts")
	if len(m) > 0 {
		r.Kept = runhook.Kept(m)
	}
	return nil
}

// Store keeps the desired state, every workload's and every document's,
// in one journal under the state dir (durable, with group commit), and one
// run record per live run under the run dir. A workload's record is under
// its name; a document's under KIND/NAME, which no workload's name is.
type Store struct {
	specs *journal.Journal
	// loaded is the journal's contents at open, for Workloads and Docs.
	loaded map[string][]byte
	// unimported are the records of an older daemon's one-file-per-workload
	// layout that could not be moved into the journal, by workload name.
	unimported map[string]Bad
	runDir     string
	owners     *Owners

	// encoded is each workload's spec as last saved, encoded: a record
	// that changes a state alone (a start, a stop) does not encode its
	// spec again. A spec is a value: the supervisor replaces it, never
	// changes one it saved, so its pointer says whether it is the same.
	// emu guards encoded, and is never held while a spec is encoded or
	// the journal written.
	emu     sync.Mutex
	encoded map[string]encodedSpec
}

type encodedSpec struct {
	spec *spec.Workload
	json []byte
}

// Bad is a stored record that does not load, with what can still be
// read of it.
type Bad struct {
	Err error
	// Network is the network its spec names; "" when that cannot be read.
	Network string
	Owner   string
}

func newBad(b []byte, err error) Bad {
	var r struct {
		Spec *struct {
			Network string `json:"network"`
		} `json:"spec"`
		Owner string `json:"owner"`
	}
	bad := Bad{Err: err}
	if b != nil && json.Unmarshal(b, &r) == nil {
		bad.Owner = r.Owner
		if r.Spec != nil {
			bad.Network = cmp.Or(r.Spec.Network, spec.NetworkHost)
		}
	}
	return bad
}

// Open opens the records under stateDir and runDir; log hears of what
// the journal's callers do not: a compaction that failed.
func Open(stateDir, runDir string, log *zap.Logger) (*Store, error) {
	s := &Store{runDir: filepath.Join(runDir, "workloads"), unimported: map[string]Bad{}, encoded: map[string]encodedSpec{}}
	if err := os.MkdirAll(s.runDir, 0o700); err != nil {
		return nil, err
	}
	j, recs, err := journal.Open(filepath.Join(stateDir, "workloads.journal"), journal.OnError(func(err error) {
		log.Error("the desired-state journal cannot compact; its log keeps every change and grows until it can", zap.Error(err))
	}))
	if err != nil {
		return nil, err
	}
	s.specs, s.loaded = j, recs
	s.importFiles(filepath.Join(stateDir, "workloads"))
	s.loadOwners(stateDir, log)
	return s, nil
}

// importFiles moves the records of the layout before the journal, one
// NAME.json per workload, into the journal.
func (s *Store) importFiles(dir string) {
	for _, name := range listJSON(dir) {
		path := filepath.Join(dir, name+".json")
		b, err := os.ReadFile(path)
		if err == nil {
			err = s.specs.Put(name, b)
		}
		if err != nil {
			s.unimported[name] = newBad(b, fmt.Errorf("%s: %w", path, err))
			continue
		}
		s.loaded[name] = b
		_ = os.Remove(path)
	}
	_ = os.Remove(dir) // once empty
}

// Commits is how many writes the journal made since Open.
func (s *Store) Commits() uint64 { return s.specs.Commits() }

// Close waits for the records being written and closes the journal.
func (s *Store) Close() error { return s.specs.Close() }

// docKey is a document's key in the journal.
func docKey(kind, name string) string { return kind + "/" + name }

// Docs are the records of the documents of a kind the journal held when
// it was opened, by name.
func (s *Store) Docs(kind string) map[string][]byte {
	out := map[string][]byte{}
	for k, b := range s.loaded {
		if name, ok := strings.CutPrefix(k, kind+"/"); ok {
			out[name] = b
		}
	}
	return out
}

// PutDoc records a document of a kind, durably; nil removes it.
func (s *Store) PutDoc(kind, name string, record []byte) error {
	if record == nil {
		return s.specs.Delete(docKey(kind, name))
	}
	return s.specs.Put(docKey(kind, name), record)
}

// SaveWorkload records a workload's desired state, durably.
func (s *Store) SaveWorkload(r Workload) error {
	b, err := s.encodeWorkload(r)
	if err != nil {
		return err
	}
	return s.specs.PutAll([]journal.Change{{Name: r.Spec.Name, Record: b, Owned: true}})
}

// encodeWorkload is r as json.Marshal encodes it, its spec's encoding
// kept from the last save when the spec is the same, the rest written
// without reflection (TestSavedRecordIsItsEncoding holds the two to the
// same bytes). The record is the journal's once written (Owned): the
// spec's encoding kept is then the part of it that it is, not a copy
// beside it.
func (s *Store) encodeWorkload(r Workload) ([]byte, error) {
	b, err := s.appendWorkload(r)
	if err != nil {
		return nil, err
	}
	s.emu.Lock()
	if e, ok := s.encoded[r.Spec.Name]; ok && e.spec == r.Spec {
		e.json = b[len(`{"spec":`) : len(`{"spec":`)+len(e.json)]
		s.encoded[r.Spec.Name] = e
	}
	s.emu.Unlock()
	return b, nil
}

// appendWorkload is encodeWorkload's encoding.
func (s *Store) appendWorkload(r Workload) ([]byte, error) {
	sp, err := s.encodeSpec(r.Spec)
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, len(sp)+256)
	b = append(b, `{"spec":`...)
	b = append(b, sp...)
	b = append(b, `,"running":`...)
	b = strconv.AppendBool(b, r.Running)
	if r.Owner != "" {
		b = append(b, `,"owner":`...)
		b = events.AppendJSONString(b, r.Owner)
	}
	if r.By != 0 {
		b = append(b, `,"by":`...)
		b = strconv.AppendUint(b, uint64(r.By), 10)
	}
	if r.Rest != "" {
		b = append(b, `,"rest":`...)
		b = events.AppendJSONString(b, string(r.Rest))
	}
	if r.LastError != "" {
		b = append(b, `,"last_error":`...)
		b = events.AppendJSONString(b, r.LastError)
	}
	if r.Reason != "" {
		b = append(b, `,"reason":`...)
		b = events.AppendJSONString(b, r.Reason)
	}
	if r.StartedAt != nil {
		b = append(b, `,"started_at":`...)
		if b, err = events.AppendJSONTime(b, *r.StartedAt); err != nil {
			return nil, err
		}
	}
	if r.LastExit != nil {
		b = append(b, `,"last_exit":`...)
		if b, err = r.LastExit.AppendJSON(b); err != nil {
			return nil, err
		}
	}
	if r.Restarts != 0 {
		b = append(b, `,"restarts":`...)
		b = strconv.AppendInt(b, int64(r.Restarts), 10)
	}
	if r.ScheduledThrough != nil {
		b = append(b, `,"scheduled_through":`...)
		if b, err = events.AppendJSONTime(b, *r.ScheduledThrough); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}

// encodeSpec is sp encoded, from the last save of its workload when sp is
// the spec that save had.
func (s *Store) encodeSpec(sp *spec.Workload) ([]byte, error) {
	s.emu.Lock()
	e, ok := s.encoded[sp.Name]
	s.emu.Unlock()
	if ok && e.spec == sp {
		return e.json, nil
	}
	b, err := json.Marshal(sp)
	if err != nil {
		return nil, err
	}
	s.emu.Lock()
	s.encoded[sp.Name] = encodedSpec{sp, b}
	s.emu.Unlock()
	return b, nil
}

// SaveRun records workload name's live run, replacing the one before.
func (s *Store) SaveRun(name string, r Run) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return atomicfile.Replace(filepath.Join(s.runDir, name+".json"), b, 0o600)
}

// RemoveWorkload forgets a workload's desired state, durably.
func (s *Store) RemoveWorkload(name string) error {
	s.emu.Lock()
	delete(s.encoded, name)
	s.emu.Unlock()
	return s.specs.Delete(name)
}

// RemoveRun forgets workload name's run record; none is no error.
func (s *Store) RemoveRun(name string) error {
	return removeFile(filepath.Join(s.runDir, name+".json"))
}

// LoadRun reads workload name's run record; ok is false when there is
// none.
func (s *Store) LoadRun(name string) (r Run, ok bool, err error) {
	ok, err = readJSON(filepath.Join(s.runDir, name+".json"), &r)
	return r, ok, err
}

// RecoverRuns reads the run record of each name and has recover say
// whether the run is alive (driver.Runtimes.Recover), many at once: each
// is a file read and a process or container looked up, and a restart over
// thousands waits on them. A name whose record does not load is nil.
func (s *Store) RecoverRuns(ctx context.Context, names []string, recover func(context.Context, driver.State) (driver.Process, error)) []*Recovered {
	found := make([]*Recovered, len(names))
	par.Each(len(names), recoverWorkers, func(i int) {
		rec, ok, err := s.LoadRun(names[i])
		if err != nil || !ok {
			return
		}
		r := &Recovered{Run: rec}
		r.Proc, r.Err = recover(ctx, rec.Process)
		found[i] = r
	})
	return found
}

// recoverWorkers bounds the runs looked up at once: enough to keep a
// runtime's round trips overlapped, few enough not to crowd it.
const recoverWorkers = 16

// Workloads returns every workload's record the store held when it was
// opened, by name, its spec defaulted and valid. A record that cannot be
// read is reported by workload name and skipped: one bad record must not
// keep the others down.
func (s *Store) Workloads() (recs []Workload, bad map[string]Bad) {
	var names []string
	for name := range s.loaded {
		if !strings.Contains(name, "/") { // not a document's (docKey)
			names = append(names, name)
		}
	}
	slices.Sort(names)
	// Decoding and validating thousands of specs is the bulk of a
	// restart's own work: each is independent.
	got := make([]Workload, len(names))
	raws := make([][]byte, len(names))
	errs := make([]error, len(names))
	par.Each(len(names), 0, func(i int) { got[i], raws[i], errs[i] = decodeWorkload(names[i], s.loaded[names[i]]) })
	bad = maps.Clone(s.unimported)
	for i, name := range names {
		if errs[i] != nil {
			bad[name] = newBad(s.loaded[name], errs[i])
			continue
		}
		delete(bad, name) // an unimported file of a name the journal holds
		recs = append(recs, got[i])
		s.emu.Lock()
		s.encoded[name] = encodedSpec{got[i].Spec, raws[i]}
		s.emu.Unlock()
	}
	return recs, bad
}

// decodeWorkload reads workload name's record, its spec defaulted and
// valid, and the spec's bytes as the record holds them.
func decodeWorkload(name string, b []byte) (Workload, []byte, error) {
	var l struct {
		Workload
		Spec storedSpec `json:"spec"`
	}
	if err := json.Unmarshal(b, &l); err != nil {
		return l.Workload, nil, err
	}
	r := l.Workload
	r.Spec = l.Spec.sp
	if r.Spec == nil || r.Spec.Name != name {
		return r, nil, fmt.Errorf("record does not hold workload %q", name)
	}
	r.Spec.SetDefaults()
	return r, l.Spec.raw, r.Spec.Validate()
}

// storedSpec is a record's spec decoded, with its bytes: a workload's
// first save after a restart, which changes its state alone, writes them
// again instead of encoding the spec (at a daemon's first stop of
// thousands, that encoding was a tenth of its CPU). They are the spec as
// an earlier daemon encoded it, defaults and all; what defaults this one
// adds, it adds again at every load.
type storedSpec struct {
	sp  *spec.Workload
	raw []byte
}

func (s *storedSpec) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	var sp spec.Workload
	if err := json.Unmarshal(b, &sp); err != nil {
		return err
	}
	// Kept past the call, so copied (json.Unmarshaler's rule); the first
	// save replaces it with the part of the journal's record it is.
	s.sp, s.raw = &sp, bytes.Clone(b)
	return nil
}

// RunNames lists the workloads that have a run record.
func (s *Store) RunNames() []string { return listJSON(s.runDir) }

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

func removeFile(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
