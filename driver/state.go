package driver

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/flyd-dev/flyd/spec"
)

// State is what a run leaves so that a later daemon can adopt it.
//
// Data is the driver's own: it encodes it when the run starts (Encode)
// and reads it back in Recover (Decode), under a Version it chooses, so
// that a driver changes what it keeps without the supervisor's records
// changing. The supervisor persists State whole and never reads Data.
// The other fields are what every run has and what the supervisor shows.
// A pid alone never identifies a run: each driver keeps in Data what
// proves the pid is still the same process (its start time, the boot).
type State struct {
	Driver spec.Kind `json:"driver"`
	// PID is the run's main process as the host sees it.
	PID int `json:"pid,omitempty"`
	// ID is the runtime's own name for the run, when it has one (a
	// container's id): shown beside the pid.
	ID string `json:"id,omitempty"`
	// CarrierDir holds the run's files delivered as files; a sweep keeps
	// it while the run lives.
	CarrierDir string    `json:"carrier_dir,omitempty"`
	StartedAt  time.Time `json:"started_at"`

	Version int             `json:"version"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// Encode sets the driver's own part of the state.
func (s *State) Encode(version int, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	s.Version, s.Data = version, b
	return nil
}

// Decode reads the driver's own part of the state into v, which must
// be of the layout of s.Version.
func (s State) Decode(v any) error {
	if len(s.Data) == 0 {
		return nil
	}
	if err := json.Unmarshal(s.Data, v); err != nil {
		return fmt.Errorf("%s run state version %d: %w", s.Driver, s.Version, err)
	}
	return nil
}

// UnmarshalJSON reads a state, also as flyd wrote it before drivers kept
// their own part: that layout, one object of every runtime's fields,
// comes back as Version 0 with the whole object as Data, for each driver
// to read what it kept then.
func (s *State) UnmarshalJSON(b []byte) error {
	type plain State
	var p struct {
		plain
		ContainerID string `json:"container_id"`
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*s = State(p.plain)
	if s.Version == 0 && len(s.Data) == 0 {
		s.Data = append(json.RawMessage(nil), b...)
		s.ID = p.ContainerID
	}
	return nil
}
