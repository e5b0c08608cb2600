package carriers

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// realistic is 200 variables, three of them over the threshold.
func realistic() (own, env, secret map[string]string) {
	own = map[string]string{"PATH": "/usr/bin:/bin", "FLYD_WORKLOAD": "api", "CODEFLY__RUNTIME_CONTEXT": "native"}
	env, secret = map[string]string{}, map[string]string{}
	for i := 0; i < 190; i++ {
		env[fmt.Sprintf("CODEFLY__WORKSPACE_CONFIGURATION__GROUP%d__KEY%d", i%7, i)] = strings.Repeat("v", 64+i)
	}
	for i := 0; i < 4; i++ {
		secret[fmt.Sprintf("SECRET_%d", i)] = strings.Repeat("s", 40)
	}
	for i := 0; i < 3; i++ {
		env[fmt.Sprintf("CODEFLY__BINDING_%d", i)] = strings.Repeat("b", 40<<10+i)
	}
	return own, env, secret
}

// BenchmarkPrepare is what every start of a workload pays for its
// environment: merge, split, check, write the carriers, remove them.
func BenchmarkPrepare(b *testing.B) {
	own, env, secret := realistic()
	root := b.TempDir()
	uid, gid := os.Getuid(), os.Getgid()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		inline, files := Build(own, env, secret)
		if len(files) != 3 || len(inline)+len(files) != 200 {
			b.Fatalf("%d inline, %d files", len(inline), len(files))
		}
		dir := filepath.Join(root, fmt.Sprint(i))
		final := append(inline, Pointers(dir, files)...)
		if err := CheckExec("/usr/bin/app", []string{"/usr/bin/app", "--serve"}, final, 8<<20); err != nil {
			b.Fatal(err)
		}
		if _, err := Write(dir, uid, gid, files); err != nil {
			b.Fatal(err)
		}
		if err := Remove(dir); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBuildAndCheck is the apply-time part alone: no file is written.
func BenchmarkBuildAndCheck(b *testing.B) {
	own, env, secret := realistic()
	b.ReportAllocs()
	for b.Loop() {
		inline, files := Build(own, env, secret)
		final := append(inline, Pointers("/run/flyd/carriers/api.0123456789abcdef", files)...)
		if err := CheckExec("/usr/bin/app", []string{"/usr/bin/app"}, final, 8<<20); err != nil {
			b.Fatal(err)
		}
	}
}
