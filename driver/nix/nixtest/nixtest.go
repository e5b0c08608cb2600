// Package nixtest builds what tests of Nix workloads need, offline: flakes
// with no inputs, made from the static bash and busybox Debian ships. It is
// for tests only (driver/nix's and integration's).
package nixtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/flyd-dev/flyd/internal/nixsystem"
	"github.com/flyd-dev/flyd/internal/testenv"
)

// Require skips (fails under CI=true) without root, nix or the static
// tools the test flakes are built from.
func Require(tb testing.TB) {
	tb.Helper()
	testenv.RequireRoot(tb, "nix runs single-user as root")
	for _, p := range []string{"/bin/bash-static", "/bin/busybox"} {
		if _, err := os.Stat(p); err != nil {
			testenv.Skip(tb, "test flakes need "+p+" (bash-static, busybox-static)")
		}
	}
	if _, err := exec.LookPath("nix"); err != nil {
		testenv.Skip(tb, "nix is not installed (nix-bin)")
	}
}

// WriteFlake writes a flake with no inputs, built from static bash and
// busybox: packages.<system>.hello (bin/hello prints its environment, bin/sleep
// is busybox) and devShells.<system>.default, which has hello on PATH and sets
// GREETING.
func WriteFlake(tb testing.TB, dir, greeting string) {
	tb.Helper()
	if err := os.MkdirAll(filepath.Join(dir, "tools"), 0o755); err != nil {
		tb.Fatal(err)
	}
	for name, src := range map[string]string{"bash": "/bin/bash-static", "busybox": "/bin/busybox"} {
		dst := filepath.Join(dir, "tools", name)
		if _, err := os.Stat(dst); err == nil {
			continue
		}
		data, err := os.ReadFile(src)
		if err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(dst, data, 0o755); err != nil {
			tb.Fatal(err)
		}
	}
	flake := `{
  outputs = { self }: let
    system = "` + nixsystem.Name() + `";
    tools = builtins.path { path = ./tools; name = "tools"; };
    mk = name: script: derivation {
      inherit name system;
      builder = "${tools}/bash";
      args = [ "-c" script ];
    };
    hello = mk "hello" ''
      ${tools}/busybox mkdir -p $out/bin
      ${tools}/busybox printf '#!${tools}/bash\necho "hello-from-package GREETING=$GREETING CTX=$CODEFLY__RUNTIME_CONTEXT TMPDIR=$TMPDIR OWN=$OWN"\n' > $out/bin/hello
      ${tools}/busybox chmod +x $out/bin/hello
      ${tools}/busybox ln -s ${tools}/busybox $out/bin/sleep
    '';
  in {
    packages.${system} = { inherit hello; default = hello; };
    devShells.${system}.default = derivation {
      name = "shell";
      inherit system;
      outputs = [ "out" ];
      builder = "${tools}/bash";
      args = [ "-c" "echo > $out" ];
      SHELL = "${tools}/bash";
      GREETING = "` + greeting + `";
      OWN = "from-shell";
      stdenv = mk "stdenv" ''
        ${tools}/busybox mkdir -p $out
        echo 'export PATH=${hello}/bin:${tools}' > $out/setup
        echo 'runHook() { eval "''${!1}"; }' >> $out/setup
      '';
      PATH = "${hello}/bin:${tools}";
    };
  };
}
`
	if err := os.WriteFile(filepath.Join(dir, "flake.nix"), []byte(flake), 0o644); err != nil {
		tb.Fatal(err)
	}
}
