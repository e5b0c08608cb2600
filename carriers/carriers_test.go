package carriers

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/internal/testenv"
)

func TestFileCarrierThreshold(t *testing.T) {
	at := strings.Repeat("a", FileCarrierThreshold)
	over := strings.Repeat("b", FileCarrierThreshold+1)
	inline, files := Build(map[string]string{"AT": at, "CODEFLY__OVER": over, "SMALL": "x"})
	if !slices.Equal(inline, []string{"AT=" + at, "SMALL=x"}) {
		t.Fatalf("inline keys wrong: %d entries", len(inline))
	}
	if len(files) != 1 || files[0].Key != "CODEFLY__OVER" || files[0].Value != over {
		t.Fatalf("files = %d entries", len(files))
	}
	if got := FileKey("CODEFLY__OVER"); got != "CODEFLY__FILE__OVER" {
		t.Fatalf("FileKey = %s", got)
	}
	if got := FileKey("BIG"); got != "CODEFLY__FILE__BIG" {
		t.Fatalf("FileKey = %s", got)
	}
}

func TestCheckExecBoundaries(t *testing.T) {
	const stack = 8 << 20
	secret := "do-not-print-" + strings.Repeat("s", MaxArgStrlen)
	tests := []struct {
		name string
		argv []string
		env  []string
		st   uint64
		kind error
		has  string
	}{
		{"argument of MAX_ARG_STRLEN-1 with its NUL", []string{"x", strings.Repeat("a", MaxArgStrlen-1)}, nil, stack, nil, ""},
		{"argument of MAX_ARG_STRLEN", []string{"x", strings.Repeat("a", MaxArgStrlen)}, nil, stack, errdefs.ErrArgumentTooLong, "argument 1"},
		{"env string too long", []string{"x"}, []string{"HUGE=" + secret}, stack, errdefs.ErrEnvironmentTooLarge, "HUGE"},
		{"inline CODEFLY__ over budget", []string{"x"}, codefly(20, 30000), stack, errdefs.ErrEnvironmentTooLarge, "CODEFLY__V"},
		{"inline CODEFLY__ at budget", []string{"x"}, codefly(16, 32768), stack, nil, ""},
		{"over ARG_MAX with a small stack", []string{"x"}, many(40, 4000), 512 << 10, errdefs.ErrEnvironmentTooLarge, "ARG_MAX"},
		{"same with the default stack", []string{"x"}, many(40, 4000), stack, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckExec("/bin/x", tt.argv, tt.env, tt.st)
			if tt.kind == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, tt.kind) || !strings.Contains(err.Error(), tt.has) {
				t.Fatalf("error %v: want %v naming %q", err, tt.kind, tt.has)
			}
			if strings.Contains(err.Error(), "do-not-print") || strings.Contains(err.Error(), "aaaa") {
				t.Fatal("the error holds a value")
			}
		})
	}
}

// TestStringsLimitMatchesTheKernel runs execve itself just under and just
// over the computed limit, with a lowered RLIMIT_STACK.
func TestStringsLimitMatchesTheKernel(t *testing.T) {
	const stack = 1 << 20 // strings limit: 256 KiB
	path := "/bin/true"
	argv := []string{path}
	fill := func(total int64) []string {
		// One variable per 100 KiB, the last one filling the rest.
		var env []string
		for i := 0; total > 0; i++ {
			n := min(total, 100<<10)
			kv := "K" + strings.Repeat("0", 3) + string(rune('a'+i)) + "="
			env = append(env, kv+strings.Repeat("v", int(n)-len(kv)-1))
			total -= n
		}
		return env
	}
	base := int64(len(path)+1) + int64(len(argv[0])+1)
	under := fill(StringsLimit(stack, 1, 3) - base)
	if len(under) != 3 {
		t.Fatalf("fixture has %d variables, want 3", len(under))
	}
	if err := CheckExec(path, argv, under, stack); err != nil {
		t.Fatalf("under the limit: %v", err)
	}
	over := fill(StringsLimit(stack, 1, 3) - base + 1)
	if err := CheckExec(path, argv, over, stack); !errors.Is(err, errdefs.ErrEnvironmentTooLarge) {
		t.Fatalf("over the limit: %v", err)
	}
	if got := execWithStack(t, path, argv, under, stack); got != nil {
		t.Fatalf("the kernel refused what CheckExec accepted: %v", got)
	}
	if got := execWithStack(t, path, argv, over, stack); !errors.Is(got, syscall.E2BIG) {
		t.Fatalf("the kernel accepted what CheckExec refused: %v", got)
	}
}

func codefly(n, size int) []string {
	var env []string
	for i := 0; i < n; i++ {
		env = append(env, "CODEFLY__V"+strings.Repeat("x", i)+"="+strings.Repeat("c", size))
	}
	return env
}

func many(n, size int) []string {
	var env []string
	for i := 0; i < n; i++ {
		env = append(env, "VAR"+strings.Repeat("x", i)+"="+strings.Repeat("v", size))
	}
	return env
}

func TestWriteModesOwnerAndCleanup(t *testing.T) {
	testenv.RequireRoot(t, "needs root to give files to another user")
	dir := filepath.Join(t.TempDir(), "run1")
	value := strings.Repeat("z", 72<<10)
	entries, err := Write(dir, 65534, 65534, []File{{Key: "BIG", Value: value}})
	if err != nil {
		t.Fatal(err)
	}
	want := "CODEFLY__FILE__BIG=" + filepath.Join(dir, "BIG")
	if !slices.Equal(entries, []string{want}) {
		t.Fatalf("entries = %q", entries)
	}
	for _, c := range []struct {
		path string
		mode os.FileMode
	}{{dir, 0o700 | os.ModeDir}, {filepath.Join(dir, "BIG"), 0o600}} {
		fi, err := os.Lstat(c.path)
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if fi.Mode() != c.mode || st.Uid != 65534 || st.Gid != 65534 {
			t.Fatalf("%s: mode %v owner %d:%d", c.path, fi.Mode(), st.Uid, st.Gid)
		}
	}
	got, ok, err := Lookup([]string{want}, "BIG", true)
	if err != nil || !ok || got != value {
		t.Fatalf("Lookup: ok %v err %v, %d bytes", ok, err, len(got))
	}
	// A directory that already exists (a symlink planted by someone) is
	// refused, never followed.
	target := t.TempDir()
	planted := filepath.Join(t.TempDir(), "planted")
	if err := os.Symlink(target, planted); err != nil {
		t.Fatal(err)
	}
	if _, err := Write(planted, 0, 0, []File{{Key: "X", Value: "v"}}); err == nil {
		t.Fatal("Write followed a planted symlink")
	}
	if ents, _ := os.ReadDir(target); len(ents) != 0 {
		t.Fatal("a file was written through the symlink")
	}
	if err := Remove(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatal("carrier directory left behind")
	}
}

func TestResolveRefusals(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good", "value", 0o600)
	open := write("open", "secret", 0o604)
	empty := write("empty", "", 0o600)
	huge := filepath.Join(dir, "huge")
	if f, err := os.Create(huge); err == nil {
		_ = f.Truncate(MaxFileCarrierBytes + 1)
		f.Close()
	}
	got, err := Resolve([]string{"A=1", "CODEFLY__FILE__X=" + good}, nil)
	if err != nil || !slices.Equal(got, []string{"A=1", "CODEFLY__X=value"}) {
		t.Fatalf("Resolve = %q, %v", got, err)
	}
	// Without a predicate, the key's namespace says what is secret.
	if _, err := Resolve([]string{"CODEFLY__FILE__SERVICE_SECRET_CONFIGURATION__SHOP__API__DB__PASSWORD=" + open}, nil); !errors.Is(err, ErrCarrier) || !strings.Contains(err.Error(), "accessible by others") {
		t.Errorf("a service secret readable by others, no predicate: %v; want refused", err)
	}
	if _, err := Resolve([]string{"CODEFLY__FILE__WORKSPACE_CONFIGURATION__DB__HOST=" + open}, nil); err != nil {
		t.Errorf("a public configuration readable by others: %v; want read", err)
	}
	secretX := func(k string) bool { return k == "CODEFLY__X" }
	tests := []struct {
		name string
		env  []string
		has  string
	}{
		{"relative", []string{"CODEFLY__FILE__X=rel/path"}, "relative"},
		{"directory", []string{"CODEFLY__FILE__X=" + dir}, "not a regular file"},
		{"missing", []string{"CODEFLY__FILE__X=" + filepath.Join(dir, "none")}, "no such file"},
		{"empty", []string{"CODEFLY__FILE__X=" + empty}, "empty"},
		{"too big", []string{"CODEFLY__FILE__X=" + huge}, "over"},
		{"both inline and file", []string{"CODEFLY__X=1", "CODEFLY__FILE__X=" + good}, "both inline and by file"},
		{"secret readable by others", []string{"CODEFLY__FILE__X=" + open}, "accessible by others"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Resolve(tt.env, secretX)
			if !errors.Is(err, ErrCarrier) || !strings.Contains(err.Error(), tt.has) {
				t.Fatalf("Resolve error %v, want ErrCarrier with %q", err, tt.has)
			}
			if strings.Contains(err.Error(), "secret") && tt.name != "secret readable by others" {
				t.Fatal("the error holds a value")
			}
		})
	}
}
