package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flyd-dev/flyd/api"
	"github.com/flyd-dev/flyd/spec"
)

// TestCrashDuringUpsAndDowns: kill -9 of the daemon while clients bring
// projects up and down at once. The next daemon has lost no project whose
// up was answered, brought back none whose down was answered, and once
// every project is down it has left nothing: no process, no namespace, no
// instance in its registry.
func TestCrashDuringUpsAndDowns(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	file := sleeperStack(t, d) // two workloads, one with an endpoint (registered)
	const clients = 6
	// answered is each project's last answered change, while its client
	// is between two changes; "" while one is on its way.
	var mu sync.Mutex
	answered := make([]string, clients)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			project := fmt.Sprintf("cr-%d", i)
			for op := "up"; ctx.Err() == nil; {
				mu.Lock()
				answered[i] = ""
				mu.Unlock()
				args := []string{"down", "-p", project}
				if op == "up" {
					args = []string{"up", "-p", project, "-f", file}
				}
				cmd := cliCmd(ctx, d.socket, args...)
				if err := cmd.Run(); err != nil {
					return // the daemon is gone: this change is in doubt
				}
				mu.Lock()
				answered[i] = op
				mu.Unlock()
				if op == "up" {
					op = "down"
				} else {
					op = "up"
				}
				time.Sleep(time.Duration(100+rand.IntN(400)) * time.Millisecond)
			}
		}()
	}
	// Killed once the ups and downs are going and half the clients are
	// between two answered changes, an up and a down among them: they
	// wait for the lock to begin their next, so none moves meanwhile.
	time.Sleep(time.Second)
	var at []string
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		mu.Lock()
		n, seen := 0, map[string]bool{}
		for _, a := range answered {
			if a != "" {
				n++
				seen[a] = true
			}
		}
		if n >= clients/2 && seen["up"] && seen["down"] || time.Now().After(deadline) {
			d.kill(t)
			at = append(at, answered...)
			mu.Unlock()
			break
		}
		mu.Unlock()
	}
	cancel()
	wg.Wait()

	d = startDaemon(t, inDir(d.dir))
	bg := context.Background()
	judged := 0
	for i, last := range at {
		project := fmt.Sprintf("cr-%d", i)
		ws, err := d.client.ListProject(bg, project)
		if err != nil {
			t.Fatal(err)
		}
		switch last {
		case "up":
			judged++
			if len(ws) != 2 {
				t.Errorf("project %s, whose up was answered, has %d workloads after the crash; want 2", project, len(ws))
			}
		case "down":
			judged++
			if len(ws) != 0 {
				t.Errorf("project %s, whose down was answered, has %d workloads again after the crash", project, len(ws))
			}
		}
	}
	t.Logf("%d of %d projects between two answered changes at the kill: %q", judged, clients, at)
	if judged < 2 {
		t.Fatalf("only %d projects could be judged", judged)
	}
	for i := range clients {
		_, _, _ = runCLI(t, d.socket, "down", "-p", fmt.Sprintf("cr-%d", i))
	}
	ns, err := api.DocumentsOf[api.Network](bg, d.client, spec.KindNetwork)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range ns {
		if strings.HasPrefix(n.Name, "cr-") {
			t.Errorf("network %s is left", n.Name)
		}
	}
	if m, _ := filepath.Glob(filepath.Join(d.runDir, "netns", "cr-*")); len(m) > 0 {
		t.Errorf("namespaces left: %v", m)
	}
	eventually(t, "no instance of a downed project in the registry", func() error {
		ins, err := d.registered(t)
		if err != nil {
			return err
		}
		for _, in := range ins {
			if strings.HasPrefix(in.Name, "cr-") {
				return fmt.Errorf("%s is still registered (%s)", in.Name, in.ID)
			}
		}
		return nil
	})
}
