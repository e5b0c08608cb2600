package netalloc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"testing"

	"github.com/flyd-dev/flyd/errdefs"
)

func TestAssignConflictBetweenWorkloads(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name  string
		first Request // held by api-server, endpoint http
		mode  Mode    // what the second workload asks for, on the same number
	}{
		{"fixed vs fixed", Request{Endpoint: "http", Mode: ModeFixed}, ModeFixed},
		{"hashed vs fixed", Request{Endpoint: "http", Mode: ModeHashed}, ModeFixed},
		{"fixed vs hashed", Request{Endpoint: "http", Mode: ModeFixed}, ModeHashed},
		{"ephemeral vs fixed", Request{Endpoint: "http", Mode: ModeEphemeral}, ModeFixed},
		{"hashed vs hashed", Request{Endpoint: "http", Mode: ModeHashed}, ModeHashed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, _ := newManager(t)
			first := tt.first
			if first.Mode != ModeEphemeral {
				first.Port = freePort(t)
			}
			got, err := m.Assign(ctx, "host", nil, "api-server", []Request{first})
			if err != nil {
				t.Fatal(err)
			}
			port := got[0].Port
			_, err = m.Assign(ctx, "host", nil, "worker", []Request{{Endpoint: "web", Mode: tt.mode, Port: port}})
			if !errors.Is(err, errdefs.ErrPortInUse) {
				t.Fatalf("second workload: err = %v, want ErrPortInUse", err)
			}
			want := fmt.Sprintf("port %d in network host is held by workload api-server (endpoint http)", port)
			if first.Mode == ModeHashed && tt.mode == ModeHashed {
				// Two hashes that meet: the message says the way out.
				want += ", whose hashed port is the same: give one of them a port number or ephemeral"
			}
			var pe *PortInUseError
			if !errors.As(err, &pe) || pe.Error() != want {
				t.Fatalf("err = %q, want it to say %q", err, want)
			}
			// Another network is another namespace: the same number is free there.
			if _, err := m.Assign(ctx, "ci-1", nil, "worker", []Request{{Endpoint: "web", Mode: tt.mode, Port: port}}); err != nil {
				t.Fatalf("same port in another network: %v", err)
			}
		})
	}
}

// TestAssignSameHolderIsIdempotent re-applies a workload while its own
// process listens on its ports: nothing is probed, nothing moves.
func TestAssignSameHolderIsIdempotent(t *testing.T) {
	ctx := context.Background()
	m, dir := newManager(t)
	fixed := freePort(t)
	reqs := []Request{
		{Endpoint: "http", Mode: ModeFixed, Port: fixed},
		{Endpoint: "tmp", Mode: ModeEphemeral},
	}
	first, err := m.Assign(ctx, "host", nil, "api-server", reqs)
	if err != nil {
		t.Fatal(err)
	}
	listen(t, "tcp", fmt.Sprintf("127.0.0.1:%d", first[0].Port))
	listen(t, "tcp", fmt.Sprintf("127.0.0.1:%d", first[1].Port))
	before := fileStamp(t, dir, "host/api-server")

	ns := &countingNS{}
	again, err := m.Assign(ctx, "host", ns, "api-server", reqs)
	if err != nil {
		t.Fatalf("re-assign while listening: %v", err)
	}
	if !slices.Equal(first, again) {
		t.Errorf("re-assign moved ports: %v, then %v", first, again)
	}
	if n := ns.calls.Load(); n != 0 {
		t.Errorf("re-assign entered the namespace %d times, want 0 (no probe)", n)
	}
	if after := fileStamp(t, dir, "host/api-server"); after != before {
		t.Error("re-assign rewrote an unchanged table")
	}
	// The daemon restarts: the ephemeral port survives too.
	m2, err := NewManager(dir)
	if err != nil {
		t.Fatal(err)
	}
	restarted, err := m2.Assign(ctx, "host", nil, "api-server", reqs)
	if err != nil || !slices.Equal(first, restarted) {
		t.Errorf("after restart: %v, %v; want %v", restarted, err, first)
	}
}

func TestAssignChangesAndReleasesEndpoints(t *testing.T) {
	ctx := context.Background()
	m, _ := newManager(t)
	a, b := freePort(t), freePort(t)
	first, err := m.Assign(ctx, "host", nil, "w", []Request{
		{Endpoint: "http", Mode: ModeFixed, Port: a},
		{Endpoint: "grpc", Mode: ModeEphemeral},
		{Endpoint: "admin", Mode: ModeFixed, Port: b},
	})
	if err != nil {
		t.Fatal(err)
	}
	// http moves to b (admin's port, released in the same call), grpc
	// turns fixed on a, admin goes away.
	got, err := m.Assign(ctx, "host", nil, "w", []Request{
		{Endpoint: "http", Mode: ModeHashed, Port: b},
		{Endpoint: "grpc", Mode: ModeFixed, Port: a},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []Reservation{
		{Network: "host", Port: b, Workload: "w", Endpoint: "http", Mode: ModeHashed},
		{Network: "host", Port: a, Workload: "w", Endpoint: "grpc", Mode: ModeFixed},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("Assign = %v, want %v", got, want)
	}
	if list := m.List(); len(list) != 2 {
		t.Fatalf("List = %v, want only the two new reservations (old ephemeral %d released)", list, first[1].Port)
	}
	// Same number, other mode: kept, relabelled.
	got, err = m.Assign(ctx, "host", nil, "w", []Request{{Endpoint: "http", Mode: ModeFixed, Port: b}})
	if err != nil || got[0].Mode != ModeFixed || got[0].Port != b {
		t.Fatalf("hashed→fixed on one number: %v, %v", got, err)
	}
	// Nothing asked: everything released, the network is free.
	if _, err := m.Assign(ctx, "host", nil, "w", nil); err != nil {
		t.Fatal(err)
	}
	if m.InUse("host") {
		t.Errorf("network still in use after an empty Assign: %v", m.List())
	}
}

func TestAssignAllOrNothing(t *testing.T) {
	ctx := context.Background()
	m, dir := newManager(t)
	held, kept, fresh := freePort(t), freePort(t), freePort(t)
	if _, err := m.Assign(ctx, "host", nil, "api-server", []Request{{Endpoint: "http", Mode: ModeFixed, Port: held}}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Assign(ctx, "host", nil, "worker", []Request{{Endpoint: "old", Mode: ModeFixed, Port: kept}}); err != nil {
		t.Fatal(err)
	}
	before := m.List()
	stamp := fileStamp(t, dir, "host/worker")
	_, err := m.Assign(ctx, "host", nil, "worker", []Request{
		{Endpoint: "a", Mode: ModeFixed, Port: fresh},
		{Endpoint: "b", Mode: ModeEphemeral},
		{Endpoint: "c", Mode: ModeFixed, Port: held},
	})
	if !errors.Is(err, errdefs.ErrPortInUse) {
		t.Fatalf("err = %v, want ErrPortInUse", err)
	}
	if after := m.List(); !slices.Equal(before, after) {
		t.Errorf("a refused Assign changed the table:\nbefore %v\nafter  %v", before, after)
	}
	if fileStamp(t, dir, "host/worker") != stamp {
		t.Error("a refused Assign rewrote the table file")
	}
}

func TestAssignRefusesWhenTheTableCannotBeWritten(t *testing.T) {
	ctx := context.Background()
	m, dir := newManager(t)
	// A directory where the table file goes makes the rename fail.
	if err := os.MkdirAll(dir+"/host/w.json", 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Assign(ctx, "host", nil, "w", []Request{{Endpoint: "http", Mode: ModeEphemeral}}); err == nil {
		t.Fatal("Assign succeeded without persisting")
	}
	if m.InUse("host") || len(leftovers(t, dir)) != 0 {
		t.Errorf("failed write left state: table %v, files %v", m.List(), leftovers(t, dir))
	}
}

func TestAssignInvalid(t *testing.T) {
	m, _ := newManager(t)
	tests := []struct {
		name     string
		network  string
		workload string
		reqs     []Request
	}{
		{"bad network", "../etc", "w", nil},
		{"empty network", "", "w", nil},
		{"empty workload", "host", "", []Request{{Endpoint: "e", Mode: ModeEphemeral}}},
		{"empty endpoint", "host", "w", []Request{{Mode: ModeEphemeral}}},
		{"unknown mode", "host", "w", []Request{{Endpoint: "e", Mode: "random"}}},
		{"port zero", "host", "w", []Request{{Endpoint: "e", Mode: ModeFixed}}},
		{"port too big", "host", "w", []Request{{Endpoint: "e", Mode: ModeHashed, Port: 65536}}},
		{"ephemeral with port", "host", "w", []Request{{Endpoint: "e", Mode: ModeEphemeral, Port: 8080}}},
		{"endpoint twice", "host", "w", []Request{{Endpoint: "e", Mode: ModeEphemeral}, {Endpoint: "e", Mode: ModeEphemeral}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := m.Assign(context.Background(), tt.network, nil, tt.workload, tt.reqs)
			if !errors.Is(err, errdefs.ErrInvalid) {
				t.Errorf("err = %v, want ErrInvalid", err)
			}
		})
	}
}

// fileStamp identifies one write of a table file: a rewrite makes a new
// file (rename), so the inode changes even when the bytes do not.
// fileStamp identifies the file of NETWORK/WORKLOAD (file) under dir, so
// a test can tell whether it was replaced.
func fileStamp(t *testing.T, dir, file string) uint64 {
	t.Helper()
	fi, err := os.Stat(dir + "/" + file + ".json")
	if err != nil {
		t.Fatal(err)
	}
	return inodeOf(fi)
}
