package logpipe

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/driver"
	"github.com/flyd-dev/flyd/logfile"
	"github.com/flyd-dev/flyd/runhook"
	"github.com/flyd-dev/flyd/spec"
)

// fileLogs is a runtime whose runs write their log file themselves.
type fileLogs struct{ driver.Driver }

func (fileLogs) WritesLogFile() {}

// TestHook: a run writes to a pipe into its log, or to its log file when
// there are no pipes or its runtime writes the file; once it ended its
// output is all in its log; the workload's removal removes the log.
func TestHook(t *testing.T) {
	for _, tc := range []struct {
		name      string
		pipes     bool
		runtime   driver.Driver
		wantPiped bool
	}{
		{name: "piped", pipes: true, wantPiped: true},
		{name: "no pipes", pipes: false},
		{name: "a runtime that writes its log", pipes: true, runtime: fileLogs{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			book := logfile.NewBook(filepath.Join(dir, "logs"), 1<<20, 1)
			defer book.Close()
			if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o750); err != nil {
				t.Fatal(err)
			}
			rot, err := logfile.NewRotator(book, 1<<20, nil, func(string, string, error) {})
			if err != nil {
				t.Fatal(err)
			}
			defer rot.Close()
			var p *Pipes
			if tc.pipes {
				sock := filepath.Join(dir, "logs.sock")
				h := &holders{t: t}
				if p, err = Open(Config{Socket: sock, StartHolder: h.start(sock)}); err != nil {
					t.Fatal(err)
				}
				defer p.Close()
			}
			hook := NewHook(p, book, rot, zap.NewNop())
			r := &runhook.Run{Task: driver.Task{Workload: "w", Spec: &spec.Workload{Name: "w"}}, Driver: tc.runtime}
			if err := hook.Prestart(context.Background(), r); err != nil {
				t.Fatal(err)
			}
			if piped(r) != tc.wantPiped || r.Task.Log == nil {
				t.Fatalf("log pipe %v (want %v), output %v", piped(r), tc.wantPiped, r.Task.Log)
			}
			const n = 1000
			cmd := lines(n)
			cmd.Stdout, cmd.Stderr = r.Task.Log, r.Task.Log
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			_ = r.Task.Log.Close()
			r.Task.Log = nil
			if err := cmd.Wait(); err != nil {
				t.Fatal(err)
			}
			hook.Exited(context.Background(), r)
			checkLines(t, book.Path("w"), n)
			hook.Destroy(context.Background(), "w")
			if _, err := os.Stat(book.Path("w")); !os.IsNotExist(err) {
				t.Errorf("the log outlived its workload: %v", err)
			}
		})
	}
}
