package daemon

import (
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestNotify(t *testing.T) {
	addr := filepath.Join(t.TempDir(), "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: addr, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	t.Setenv("NOTIFY_SOCKET", addr)
	notify("READY=1")
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 64)
	n, err := conn.Read(buf)
	if err != nil || string(buf[:n]) != "READY=1" {
		t.Fatalf("read %q, %v", buf[:n], err)
	}
}

// TestCapacity: the workloads the limits allow, and the one that binds.
func TestCapacity(t *testing.T) {
	for _, tt := range []struct {
		c  capacity
		n  int
		by string
	}{
		{capacity{files: 1048576, pidMax: 4194304, threadsMax: 190000}, 190000, "kernel.threads-max"},
		{capacity{files: 20000, pidMax: 4194304, threadsMax: 190000}, (20000 - filesReserved) / filesPerWorkload, "open files"},
		{capacity{files: 1048576, pidMax: 32768, threadsMax: 190000}, 32768, "kernel.pid_max"},
		{capacity{files: 100, pidMax: 32768}, 0, "open files"},
	} {
		n, by := tt.c.workloads()
		if n != tt.n || !strings.Contains(by, tt.by) {
			t.Errorf("%+v: %d bound by %q, want %d by %s", tt.c, n, by, tt.n, tt.by)
		}
	}
	if c := readCapacity(); c.files == 0 || c.pidMax == 0 {
		t.Errorf("readCapacity() = %+v: the open files and pid_max limits are always there", c)
	}
}
