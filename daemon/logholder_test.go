package daemon

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// TestHolderCommand: the log holder is flyd-log-holder beside the
// daemon's program when it is there and could be changed by no one who
// could not change the daemon's; else the daemon's program holds the
// logs itself, and a program it refused is named in its log.
func TestHolderCommand(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	self := filepath.Join(dir, "flyd-daemon")
	holder := filepath.Join(dir, holderProgram)
	if err := os.WriteFile(self, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zap.WarnLevel)
	log := zap.New(core)
	fallback := []string{self, "log-holder", "--socket", "/run/x/logs.sock"}

	if got := holderCommandOf(self, "/run/x/logs.sock", log); !slices.Equal(got, fallback) {
		t.Errorf("without %s: %q, want %q", holderProgram, got, fallback)
	}
	if err := os.WriteFile(holder, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got, want := holderCommandOf(self, "/run/x/logs.sock", log), []string{holder, "--socket", "/run/x/logs.sock"}; !slices.Equal(got, want) {
		t.Errorf("with %s beside it: %q, want %q", holderProgram, got, want)
	}
	if logs.Len() != 0 {
		t.Errorf("warned of a holder it ran: %v", logs.All())
	}
	// Writable by others: whoever could write it would run as root.
	if err := os.Chmod(holder, 0o757); err != nil {
		t.Fatal(err)
	}
	if got := holderCommandOf(self, "/run/x/logs.sock", log); !slices.Equal(got, fallback) {
		t.Errorf("with a %s others may write: %q, want the daemon's own %q", holderProgram, got, fallback)
	}
	if logs.Len() != 1 {
		t.Errorf("refused %s without a warning: %v", holderProgram, logs.All())
	}
}
