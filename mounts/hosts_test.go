package mounts

import (
	"context"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/driver"
	"github.com/flyd-dev/flyd/runhook"
	"github.com/flyd-dev/flyd/spec"
)

// inode is the inode of path, which a bind holds.
func inode(t *testing.T, path string) uint64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

func run(name, network string, kind spec.Kind) *runhook.Run {
	return &runhook.Run{Task: driver.Task{Workload: name, Spec: &spec.Workload{Name: name, Kind: kind, Network: network}}}
}

// TestHostsFile: a run of an isolated network gets its network's hosts
// file, naming its workloads (and groups) at 127.0.0.1 by their short and
// full names, the host's end of the link, then the host's entries; it is
// written again in place (the inode a bind holds) when what it names
// changes, and removed after the network's last run; a run of the host's
// network, or one that runs nothing, gets none.
func TestHostsFile(t *testing.T) {
	state := t.TempDir()
	declared := map[string]map[string]string{"ci-7.net": {"ci-7.db": "", "ci-7.web-1": "ci-7.web", "ci-7.web-2": "ci-7.web"}}
	h := NewHook(nil, state, func(n string) map[string]string {
		out := map[string]string{}
		for k, v := range declared[n] {
			out[k] = v
		}
		return out
	}, zap.NewNop())
	ctx := context.Background()
	db := run("ci-7.db", "ci-7.net", spec.KindNative)
	if err := h.Prestart(ctx, db); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(state, "hosts", "ci-7.net")
	if db.Task.Mounts.Hosts != file {
		t.Fatalf("hosts %q, want %q", db.Task.Mounts.Hosts, file)
	}
	text, _ := os.ReadFile(file)
	for _, want := range []string{"127.0.0.1\tlocalhost\n", "127.0.0.1\tdb ci-7.db\n", "127.0.0.1\tweb ci-7.web\n", "127.0.0.1\tweb-2 ci-7.web-2\n"} {
		if !strings.Contains(string(text), want) {
			t.Errorf("the file lacks %q:\n%s", want, text)
		}
	}
	if own, err := os.ReadFile("/etc/hosts"); err == nil && !strings.HasSuffix(string(text), string(own)) {
		t.Errorf("the file does not end with the host's entries:\n%s", text)
	}
	ino := inode(t, file)

	// A workload added shows at the next run's start, or its adoption;
	// a run that knows its link gives its host's address.
	declared["ci-7.net"]["ci-7.cache"] = ""
	if err := h.hosts.hold("ci-7.net"); err != nil { // as a run adopted
		t.Fatal(err)
	}
	text, _ = os.ReadFile(file)
	if !strings.Contains(string(text), "127.0.0.1\tcache ci-7.cache\n") || inode(t, file) != ino {
		t.Errorf("after a workload was added: inode %d (was %d)\n%s", inode(t, file), ino, text)
	}
	if _, err := h.hosts.acquire("ci-7.net", netip.MustParseAddr("10.99.0.1")); err != nil {
		t.Fatal(err)
	}
	text, _ = os.ReadFile(file)
	if !strings.Contains(string(text), "10.99.0.1\t"+HostName+"\n") {
		t.Errorf("no %s:\n%s", HostName, text)
	}

	// A removed workload goes, the file shorter in place.
	before := len(text)
	delete(declared["ci-7.net"], "ci-7.web-1")
	delete(declared["ci-7.net"], "ci-7.web-2")
	h.Destroy(ctx, "ci-7.web-2")
	text, _ = os.ReadFile(file)
	if strings.Contains(string(text), "web") || len(text) >= before || inode(t, file) != ino {
		t.Errorf("after the group was removed (inode %d, was %d):\n%s", inode(t, file), ino, text)
	}
	if !strings.Contains(string(text), "10.99.0.1\t"+HostName+"\n") {
		t.Errorf("%s lost:\n%s", HostName, text)
	}

	// Host network, external: nothing.
	for _, r := range []*runhook.Run{run("ci-7.h", spec.NetworkHost, spec.KindNative), run("ci-7.x", "ci-7.net", spec.KindExternal)} {
		if err := h.Prestart(ctx, r); err != nil || r.Task.Mounts.Hosts != "" {
			t.Errorf("%s: hosts %q, %v", r.Task.Workload, r.Task.Mounts.Hosts, err)
		}
		h.Exited(ctx, r)
	}

	// Three holds: the file goes with the last.
	h.Exited(ctx, db)
	_ = h.hosts.release("ci-7.net")
	if _, err := os.Stat(file); err != nil {
		t.Errorf("the file went before its last run: %v", err)
	}
	_ = h.hosts.release("ci-7.net")
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Errorf("the file outlives its network's last run: %v", err)
	}
}

// TestHostsSweep: what a killed daemon left goes, unless a live run's
// record names it.
func TestHostsSweep(t *testing.T) {
	state := t.TempDir()
	h := NewHook(nil, state, func(string) map[string]string { return map[string]string{} }, zap.NewNop())
	dir := filepath.Join(state, "hosts")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"a.net", "b.net"} {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var kept runhook.Kept
	kept.Set(keptHosts, filepath.Join(dir, "a.net"))
	h.Sweep([]Live{{Workload: "a.w", Kept: kept}})
	if _, err := os.Stat(filepath.Join(dir, "a.net")); err != nil {
		t.Errorf("a live run's file went: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "b.net")); !os.IsNotExist(err) {
		t.Errorf("a file no run binds is left: %v", err)
	}
}

// BenchmarkHostsAcquire: a run's start in a network of benchWorkloads
// whose file says them already.
func BenchmarkHostsAcquire(b *testing.B) {
	names := map[string]string{}
	for i := range benchWorkloads {
		names["p.w"+strconv.Itoa(i)] = ""
	}
	h := NewHook(nil, b.TempDir(), func(string) map[string]string { return maps.Clone(names) }, zap.NewNop())
	for b.Loop() {
		if _, err := h.hosts.acquire("p.net", netip.Addr{}); err != nil {
			b.Fatal(err)
		}
	}
}

// benchWorkloads is how many workloads BenchmarkHostsAcquire's network
// holds.
const benchWorkloads = 1000
