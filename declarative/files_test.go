package declarative

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flyd-dev/flyd/internal/testenv"
	"github.com/flyd-dev/flyd/spec"
)

func TestIsSpecFile(t *testing.T) {
	for _, tc := range []struct {
		name string
		want bool
	}{
		{"api.yaml", true},
		{"api.yml", true},
		{"api.json", true},
		{"api.yaml~", false},     // vim and emacs backup
		{".api.yaml.swp", false}, // vim swap
		{"4913", false},          // vim's probe of the directory
		{".#api.yaml", false},    // emacs lock
		{"#api.yaml#", false},    // emacs autosave
		{".api.yaml.tmp", false}, // atomic write in progress
		{".hidden.yaml", false},
		{"api.yaml.bak", false},
		{"README.md", false},
		{"api.YAML", false}, // the same rule as `flyd apply DIR`
	} {
		if got := isSpecFile(tc.name); got != tc.want {
			t.Errorf("isSpecFile(%q) = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestScanRefusesUntrustedFiles: a spec file someone other than root owns,
// or anyone may write, is a bad file, whatever it says.
func TestScanRefusesUntrustedFiles(t *testing.T) {
	testenv.RequireRoot(t, "files are given to another user")
	dir := t.TempDir()
	write := func(name string, mode os.FileMode, uid int) {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("name: "+strings.TrimSuffix(name, ".yaml")+"\ncommand: [/bin/true]\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, uid, -1); err != nil {
			t.Fatal(err)
		}
	}
	write("good.yaml", 0o644, 0)
	write("theirs.yaml", 0o644, 65534)
	write("open.yaml", 0o666, 0)
	link := func(name, target string) {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	link("link.yaml", filepath.Join(dir, "theirs.yaml"))
	link("good-link.yaml", "good.yaml")
	// A root-owned file in a user's folder: the user swaps it later.
	home := filepath.Join(t.TempDir(), "home")
	if err := os.Mkdir(home, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "web.yaml"), []byte("name: web\ncommand: [/bin/true]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(home, 65534, -1); err != nil {
		t.Fatal(err)
	}
	link("home.yaml", filepath.Join(home, "web.yaml"))
	// A root-owned 0444 file holding a process's own words.
	link("proc.yaml", "/proc/self/cmdline")
	files, err := scan(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"good.yaml": "", "good-link.yaml": "", "theirs.yaml": "owned by uid 65534",
		"open.yaml": "writable by group or others", "link.yaml": "owned by uid 65534",
		"home.yaml": "home is owned by uid 65534", "proc.yaml": "on procfs"}
	for _, f := range files {
		w, ok := want[f.name]
		if !ok {
			t.Errorf("unexpected file %s", f.name)
			continue
		}
		delete(want, f.name)
		switch {
		case w == "" && (f.err != nil || len(f.ws) != 1):
			t.Errorf("%s: %v, want read", f.name, f.err)
		case w != "" && (f.err == nil || !strings.Contains(f.err.Error(), w) || f.ws != nil):
			t.Errorf("%s: %v (%d workloads), want refused: %s", f.name, f.err, len(f.ws), w)
		}
	}
	if len(want) > 0 {
		t.Errorf("not scanned: %v", want)
	}
}

// TestScanRefusesUntrustedDir: a workloads directory that another user made
// (under a sticky parent such as /tmp, anyone can make it while it is
// missing) is never read, at whatever scan it appears.
func TestScanRefusesUntrustedDir(t *testing.T) {
	testenv.RequireRoot(t, "the directory is given to another user")
	parent := t.TempDir()
	if err := os.Chmod(parent, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(parent, "workloads.d")
	if files, err := scan(dir); err != nil || len(files) != 0 {
		t.Fatalf("missing directory: %v, %v; want empty", files, err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "root.yaml"), []byte("name: x\ncommand: [/bin/true]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, 65534, -1); err != nil {
		t.Fatal(err)
	}
	files, err := scan(dir)
	if err == nil || !strings.Contains(err.Error(), "owned by uid 65534") {
		t.Fatalf("a user's directory: %v, %v; want refused", files, err)
	}
}

// TestScanRefusesKindsNotInTheDirectory: a file holding a document of a
// kind the directory does not take (spec.DocKind.InDirectory) is refused
// whole, naming the file and the kind; one holding a kind it takes is
// read with its workloads.
func TestScanRefusesKindsNotInTheDirectory(t *testing.T) {
	testenv.RequireRoot(t, "the directory must be root's")
	for _, k := range spec.DocKinds() {
		dir := t.TempDir()
		doc := "kind: " + k.Name + "\nname: x\n---\nname: w\ncommand: [/bin/true]\n"
		if err := os.WriteFile(filepath.Join(dir, "f.yaml"), []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		files, err := scan(dir)
		if err != nil || len(files) != 1 {
			t.Fatalf("%s: scan: %v, %v", k.Name, files, err)
		}
		f := files[0]
		if k.InDirectory {
			if f.err != nil && strings.Contains(f.err.Error(), "not from the workloads directory") {
				t.Errorf("%s: a kind the directory takes is refused: %v", k.Name, f.err)
			}
			continue
		}
		if f.err == nil || !strings.Contains(f.err.Error(), filepath.Join(dir, "f.yaml")) || !strings.Contains(f.err.Error(), k.Name+" x") ||
			len(f.ws)+len(f.docs) != 0 {
			t.Errorf("%s: the file is not refused whole, naming it and the kind: %v (%d workloads, %d documents)", k.Name, f.err, len(f.ws), len(f.docs))
		}
	}
}
