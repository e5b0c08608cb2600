package netalloc

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestParseTCPLine(t *testing.T) {
	tests := []struct {
		name      string
		line      string
		port      int
		wantInode uint64
		wantState string
		wantOK    bool
	}{
		{"v4 listener", "   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 12345 1 0000000000000000 100 0 0 10 0", 8080, 12345, "0A", true},
		{"other port", "   0: 0100007F:1F91 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 12345 1", 8080, 0, "", false},
		{"v6 listener", "   1: 00000000000000000000000000000000:1F90 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 777 1", 8080, 777, "0A", true},
		{"time-wait has no inode", "   2: 0100007F:1F90 0100007F:D431 06 00000000:00000000 03:00000A3B 00000000     0        0 0 3", 8080, 0, "", false},
		{"short line", "0: 0100007F:1F90", 8080, 0, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inode, state, ok := parseTCPLine(tt.line, tt.port)
			if inode != tt.wantInode || state != tt.wantState || ok != tt.wantOK {
				t.Errorf("parseTCPLine = %d, %q, %v; want %d, %q, %v", inode, state, ok, tt.wantInode, tt.wantState, tt.wantOK)
			}
		})
	}
}

// TestSocketInodePrefersListener uses a fake /proc/net: a bound socket
// listed before the listener must not win.
func TestSocketInodePrefersListener(t *testing.T) {
	dir := t.TempDir()
	header := "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
	tcp := header + "   0: 0100007F:1F90 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 111 1\n"
	tcp6 := header + "   0: 00000000000000000000000000000000:1F90 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 222 1\n"
	write(t, filepath.Join(dir, "tcp"), tcp)
	write(t, filepath.Join(dir, "tcp6"), tcp6)
	if got := socketInode(dir, 8080); got != 222 {
		t.Errorf("socketInode = %d, want the listener 222", got)
	}
	if got := socketInode(dir, 8081); got != 0 {
		t.Errorf("socketInode for a free port = %d, want 0", got)
	}
	if got := socketInode(filepath.Join(dir, "missing"), 8080); got != 0 {
		t.Errorf("socketInode without tables = %d, want 0", got)
	}
}

func TestSocketOwnerUnknownInode(t *testing.T) {
	if pid, prog := socketOwner("/proc", 1<<62); pid != 0 || prog != "" {
		t.Errorf("socketOwner of a made-up inode = %d, %q", pid, prog)
	}
}

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

func inodeOf(fi os.FileInfo) uint64 { return fi.Sys().(*syscall.Stat_t).Ino }
