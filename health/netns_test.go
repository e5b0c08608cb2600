package health

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/flyd-dev/flyd/sandbox"
)

// TestProbesInNetwork: a listener opened inside an isolated network is
// reachable by a probe given that network, and not by the same probe in
// the host namespace, where nothing listens on the port.
func TestProbesInNetwork(t *testing.T) {
	nw := testNetwork(t)
	ln := listenInNetwork(t, nw)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	})}
	var wg sync.WaitGroup
	wg.Go(func() { _ = srv.Serve(ln) })
	defer func() {
		srv.Close()
		wg.Wait()
	}()
	addr := ln.Addr().String()
	url := "http://" + addr + "/healthz"

	// The same inode test the kernel uses: this is the network's namespace.
	want := fmt.Sprintf("net:[%d]", inode(t, nw.Path))
	inNS := []string{"/bin/sh", "-c", `test "$(readlink /proc/self/ns/net)" = "$1"`, "sh", want}

	tests := []struct {
		name    string
		probe   Probe
		healthy bool
	}{
		{"tcp inside", TCP(nw, addr), true},
		{"tcp on the host", TCP(nil, addr), false},
		{"http inside", HTTP(nw, url, 204), true},
		{"http on the host", HTTP(nil, url, 204), false},
		{"exec inside", Exec(nw, nil, sandbox.Mounts{}, nil, inNS, nil), true},
		{"exec on the host", Exec(nil, nil, sandbox.Mounts{}, nil, inNS, nil), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err, _ := check(tt.probe, time.Second)
			if tt.healthy != (err == nil) {
				t.Fatalf("Check = %v, want healthy=%v", err, tt.healthy)
			}
		})
	}
}

// listenInNetwork opens a loopback listener inside nw on a port that is
// free on the host, so that a probe in the host namespace finds nothing.
func listenInNetwork(t *testing.T, nw *sandbox.Network) net.Listener {
	t.Helper()
	for range 10 {
		var ln net.Listener
		if err := nw.Do(func() (err error) {
			ln, err = net.Listen("tcp", "127.0.0.1:0")
			return err
		}); err != nil {
			t.Fatal(err)
		}
		host, err := net.Listen("tcp", ln.Addr().String())
		if err == nil {
			host.Close()
			t.Cleanup(func() { ln.Close() })
			return ln
		}
		ln.Close()
		if !errors.Is(err, syscall.EADDRINUSE) {
			t.Fatal(err)
		}
	}
	t.Fatal("no port free both inside the network and on the host")
	return nil
}

func inode(t *testing.T, path string) uint64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}
