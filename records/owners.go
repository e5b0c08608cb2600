package records

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"sync"

	"go.uber.org/zap"
)

// ownersFile is where an older daemon recorded the owners, under the
// state dir; they are records of the journal now (kind "owner").
const ownersFile = "document-owners.json"

// ownerKind is the journal's kind of an owner's record.
const ownerKind = "owner"

// Owners are the files of the workloads directory that own documents, by
// the document's key (KIND/NAME): kept in the journal, each change
// recorded before it is in force.
type Owners struct {
	st *Store

	// mu guards m, and is held while a change is recorded in the journal,
	// so that changes are in force in the order they were recorded.
	mu sync.Mutex
	m  map[string]string
}

// loadOwners reads the owners the journal holds, and moves an older
// daemon's owners file into it; a file it cannot move is kept, and its
// owners are in force all the same.
func (s *Store) loadOwners(stateDir string, log *zap.Logger) {
	o := &Owners{st: s, m: map[string]string{}}
	s.owners = o
	path := filepath.Join(stateDir, ownersFile)
	var old map[string]string
	b, err := os.ReadFile(path)
	if err == nil {
		err = json.Unmarshal(b, &old)
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		log.Error("cannot read which files own which documents; the workloads directory applies its files again", zap.Error(err))
	}
	moved := true
	for k, owner := range old {
		b, _ := json.Marshal(owner)
		if err := s.PutDoc(ownerKind, k, b); err != nil {
			moved = false
			log.Error("cannot move a document's owner into the state journal; the file is kept", zap.String("document", k), zap.Error(err))
		}
	}
	if old != nil && moved {
		_ = os.Remove(path)
	}
	for k, b := range s.Docs(ownerKind) {
		var owner string
		if json.Unmarshal(b, &owner) == nil {
			o.m[k] = owner
		}
	}
	maps.Copy(o.m, old)
}

// Owners are the owners of the documents.
func (s *Store) Owners() *Owners { return s.owners }

// Of is the file that owns the document of key, "" for none.
func (o *Owners) Of(key string) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.m[key]
}

// Set records owner as the document's ("" for none), durably, then puts it
// in force. Changes are made one at a time: documents change seldom.
func (o *Owners) Set(key, owner string) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	var b []byte
	if owner != "" {
		b, _ = json.Marshal(owner)
	}
	if err := o.st.PutDoc(ownerKind, key, b); err != nil {
		return fmt.Errorf("cannot record the owner of %s: %w", key, err)
	}
	if owner == "" {
		delete(o.m, key)
	} else {
		o.m[key] = owner
	}
	return nil
}

// All is every document's owner, by key.
func (o *Owners) All() map[string]string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return maps.Clone(o.m)
}
