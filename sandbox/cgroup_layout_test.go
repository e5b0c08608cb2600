package sandbox

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/flyd-dev/flyd/errdefs"
)

func TestDiscoverLayout(t *testing.T) {
	dir := t.TempDir()
	bare := filepath.Join(dir, "bare")
	full := filepath.Join(dir, "full")
	for d, ctrls := range map[string]string{bare: "", full: "cpuset cpu io memory pids\n"} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "cgroup.controllers"), []byte(ctrls), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	v1 := func(id, point, opts string) string {
		return id + " 31 0:1 / " + point + " rw,relatime - cgroup cgroup rw," + opts
	}
	v2 := func(id, point string) string {
		return id + " 31 0:2 / " + point + " rw,relatime shared:9 - cgroup2 cgroup2 rw"
	}
	hybridV1 := []string{
		v1("32", "/sys/fs/cgroup/cpu,cpuacct", "cpu,cpuacct"),
		v1("33", "/sys/fs/cgroup/systemd", "xattr,name=systemd"),
		v1("34", "/sys/fs/cgroup/freezer", "freezer"),
		v1("35", "/sys/fs/cgroup/memory", "memory"),
		v1("36", "/sys/fs/cgroup/cpuset", "cpuset"),
		v1("37", "/sys/fs/cgroup/pids", "pids"),
	}
	wantV1 := layout{version: 1, hier: []hierarchy{
		{"freezer", "/sys/fs/cgroup/freezer", "/"},
		{"memory", "/sys/fs/cgroup/memory", "/"},
		{"pids", "/sys/fs/cgroup/pids", "/"},
		{"cpu", "/sys/fs/cgroup/cpu,cpuacct", "/"},
	}}
	// A hybrid host's bare tree is where its workloads' sockets are told
	// apart.
	wantHybrid := wantV1
	wantHybrid.sock = &hierarchy{"", bare, "/"}
	v2At := func(point string) layout {
		return layout{2, []hierarchy{{"", point, "/"}}, &hierarchy{"", point, "/"}}
	}
	tests := []struct {
		name    string
		lines   []string
		want    layout
		wantErr bool
	}{
		{"pure v2", []string{"25 1 0:22 / / rw - ext4 /dev/vda rw", v2("30", "/sys/fs/cgroup")},
			v2At("/sys/fs/cgroup"), false},
		{"hybrid, unified tree has no controllers", append(hybridV1, v2("38", bare)), wantHybrid, false},
		{"hybrid, unified tree has the controllers", append(hybridV1, v2("38", full)), v2At(full), false},
		{"v1 only", hybridV1, wantV1, false},
		{"only a bare cgroup2", []string{v2("38", bare)}, v2At(bare), false},
		{"no cgroups", []string{"25 1 0:22 / / rw - ext4 /dev/vda rw"}, layout{}, true},
		{"escaped mount point", []string{v1("35", `/sys/fs/cgroup/mem\040ory`, "memory")},
			layout{1, []hierarchy{{"memory", "/sys/fs/cgroup/mem ory", "/"}}, nil}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "mountinfo")
			if err := os.WriteFile(file, []byte(strings.Join(tt.lines, "\n")+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := discoverLayout(file)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("layout = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestProcCgroups(t *testing.T) {
	const hybrid = `9:name=systemd:/
8:pids:/flyd/web
4:memory:/flyd/web
2:cpu,cpuacct:/flyd/web
6:freezer:/flyd/we:b
0::/user.slice
`
	v1 := layout{version: 1, hier: []hierarchy{{ctrl: "memory"}, {ctrl: "pids"}, {ctrl: "cpu"}, {ctrl: "freezer"}, {ctrl: "blkio"}}}
	v2 := layout{version: 2, hier: []hierarchy{{}}}
	tests := []struct {
		name string
		l    layout
		want []string
	}{
		{"v1 picks each controller's line", v1, []string{"/flyd/web", "/flyd/web", "/flyd/web", "/flyd/we:b", ""}},
		{"v2 picks the 0:: line", v2, []string{"/user.slice"}},
	}
	file := filepath.Join(t.TempDir(), "cgroup")
	if err := os.WriteFile(file, []byte(hybrid), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := procCgroups(file, tt.l)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestHierarchyDir(t *testing.T) {
	tests := []struct {
		root, proc string
		want       string
		ok         bool
	}{
		{"/", "/", "/m", true},
		{"/", "/flyd/web", "/m/flyd/web", true},
		{"/docker/abc", "/docker/abc", "/m", true},
		{"/docker/abc", "/docker/abc/flyd", "/m/flyd", true},
		{"/docker/abc", "/docker/abcd", "", false},
		{"/docker/abc", "/", "", false},
	}
	for _, tt := range tests {
		got, ok := hierarchy{mount: "/m", root: tt.root}.dir(tt.proc)
		if got != tt.want || ok != tt.ok {
			t.Errorf("root %s: dir(%s) = %q, %v; want %q, %v", tt.root, tt.proc, got, ok, tt.want, tt.ok)
		}
	}
}

func TestCleanParent(t *testing.T) {
	tests := []struct {
		in, want string
		ok       bool
	}{
		{"flyd", "flyd", true},
		{"/flyd/", "flyd", true},
		{"system.slice/flyd.service/workloads", "system.slice/flyd.service/workloads", true},
		{"", "", false},
		{"/", "", false},
		{"a/../b", "", false},
		{"a//b", "", false},
		{"./a", "", false},
		{"flyd/cgroup.procs", "", false},
	}
	for _, tt := range tests {
		got, err := cleanParent(tt.in)
		if got != tt.want || (err == nil) != tt.ok {
			t.Errorf("cleanParent(%q) = %q, %v; want %q, ok %v", tt.in, got, err, tt.want, tt.ok)
		}
		if err != nil && !errors.Is(err, errdefs.ErrInvalid) {
			t.Errorf("cleanParent(%q): %v does not wrap ErrInvalid", tt.in, err)
		}
	}
}

// TestReadFile: the kernel's files are read whole, past the first
// buffer, and a missing one is fs.ErrNotExist, naming its path.
func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	big := strings.Repeat("0123456789\n", 1000)
	for _, want := range []string{"", "42\n", big} {
		p := filepath.Join(dir, "f")
		if err := os.WriteFile(p, []byte(want), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := readFile(p)
		if err != nil || string(got) != want {
			t.Fatalf("read %d bytes (%v), want %d", len(got), err, len(want))
		}
	}
	// procfs reports no size: its files are read until their end.
	want, _ := os.ReadFile("/proc/self/mountinfo")
	if got, err := readFile("/proc/self/mountinfo"); err != nil || len(got) == 0 || !bytes.Equal(got, want) {
		t.Fatalf("mountinfo: %d bytes, %v", len(got), err)
	}
	_, err := readFile(filepath.Join(dir, "missing"))
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("missing file: %v", err)
	}
}
