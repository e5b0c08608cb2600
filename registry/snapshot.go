package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/atomicfile"
)

const (
	// snapshotEvery bounds how often the state is written after changes: a
	// burst of registrations costs one write.
	snapshotEvery = 200 * time.Millisecond
	// leaseFlushEvery bounds how often heart-beats alone cause a write. A
	// daemon heart-beating a thousand instances would otherwise rewrite the
	// file five times a second; an updated_at a few seconds old costs a
	// restarted registry nothing, since leases are many heartbeats long.
	leaseFlushEvery = 2 * time.Second
	snapshotVersion = 1
)

type snapshotFile struct {
	Version   int        `json:"version"`
	Instances []Instance `json:"instances"`
	// Rev is the memory store's revision, Revs each instance's, for the
	// watches (mem_watch.go). Clean says the registry wrote the file as
	// it stopped: no change came after it.
	Rev   int64            `json:"rev,omitempty"`
	Revs  map[string]int64 `json:"revs,omitempty"`
	Clean bool             `json:"clean,omitempty"`
}

// readSnapshot reads the state written by writeSnapshot; no file is an
// empty registry. A file that cannot be read is an error rather than an
// empty registry, which would silently drop every lease.
func readSnapshot(path string) (f snapshotFile, found bool, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return f, false, nil
	}
	if err != nil {
		return f, false, fmt.Errorf("registry: reading snapshot: %w", err)
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return f, false, fmt.Errorf("registry: snapshot %s is corrupt (move it away to start empty): %w", path, err)
	}
	if f.Version != snapshotVersion {
		return f, false, fmt.Errorf("registry: snapshot %s has version %d; this registry reads version %d", path, f.Version, snapshotVersion)
	}
	out := f.Instances[:0]
	for _, in := range f.Instances {
		if in.ID != "" {
			out = append(out, in)
		}
	}
	f.Instances = out
	return f, true, nil
}

// writeSnapshot replaces the snapshot atomically: a crash leaves the old
// file or the new one, never half of one.
// clean marks the last one, written as the registry stops.
func (s *Server) writeSnapshot(clean bool) error {
	s.leasesDirty.Store(false)
	f := s.mem.state()
	f.Clean = clean
	b, err := json.Marshal(f)
	if err != nil {
		return fmt.Errorf("registry: encoding snapshot: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(s.cfg.SnapshotPath), 0o700); err != nil {
		return fmt.Errorf("registry: writing snapshot: %w", err)
	}
	if err := atomicfile.Write(s.cfg.SnapshotPath, b, 0o600); err != nil {
		return fmt.Errorf("registry: writing snapshot: %w", err)
	}
	return nil
}

// snapshotLoop writes the state after changes, at most every snapshotEvery,
// until ctx is done; Serve writes the last one.
func (s *Server) snapshotLoop(ctx context.Context) {
	lease := time.NewTicker(leaseFlushEvery)
	defer lease.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.dirty:
		case <-lease.C:
			if !s.leasesDirty.Load() {
				continue
			}
		}
		if err := s.writeSnapshot(false); err != nil {
			// The registry keeps serving; the lease tick tries again.
			s.log.Error("cannot snapshot the registry", zap.Error(err))
			s.leasesDirty.Store(true)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(snapshotEvery):
		}
	}
}
