package integration

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/flyd-dev/flyd/internal/testenv"
)

// The files this test checks, relative to the integration package.
const (
	unitFile      = "../scripts/flyd.service"
	installScript = "../scripts/install"
	uninstallFile = "../scripts/uninstall"
)

// requireTool returns the path of program, or skips the test when it is not
// installed. Under CI=true, where scripts/test installs debianPackage, a
// missing program is a broken setup and fails the test instead.
func requireTool(t *testing.T, program, debianPackage string) string {
	t.Helper()
	p, err := exec.LookPath(program)
	if err == nil {
		return p
	}
	testenv.Skip(t, fmt.Sprintf("%s is not installed (Debian package %s): %v", program, debianPackage, err))
	return ""
}

// unitEntry is one Key=Value of a unit file.
type unitEntry struct {
	section, key, value string
	line                int
}

// parseUnit reads a systemd unit file the way systemd does for what matters
// here: [Section] headers, Key=Value with blanks around '=', '#' and ';'
// comment lines, and a trailing backslash continuing a value.
func parseUnit(t *testing.T, text string) []unitEntry {
	t.Helper()
	var (
		entries []unitEntry
		section string
		pending *unitEntry
	)
	sc := bufio.NewScanner(strings.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if pending != nil {
			if strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";") {
				continue // a comment inside a continued value is dropped
			}
			cont := strings.HasSuffix(line, `\`)
			pending.value += " " + strings.TrimSuffix(line, `\`)
			if !cont {
				entries = append(entries, *pending)
				pending = nil
			}
			continue
		}
		switch {
		case line == "", strings.HasPrefix(line, "#"), strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = line[1 : len(line)-1]
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				t.Fatalf("unit line %d: %q is neither a section, a comment nor Key=Value", n, line)
			}
			e := unitEntry{section: section, key: strings.TrimSpace(k), value: strings.TrimSpace(v), line: n}
			if strings.HasSuffix(e.value, `\`) {
				e.value = strings.TrimSuffix(e.value, `\`)
				pending = &e
				continue
			}
			entries = append(entries, e)
		}
	}
	if pending != nil {
		entries = append(entries, *pending)
	}
	return entries
}

// lookup returns every value of section's key, in order.
func lookup(entries []unitEntry, section, key string) []string {
	var vs []string
	for _, e := range entries {
		if e.section == section && e.key == key {
			vs = append(vs, strings.TrimSpace(e.value))
		}
	}
	return vs
}

// verifyUnit runs `systemd-analyze verify` on a unit file and fails the test
// unless it exits 0 and says nothing about the file: an unknown key or a bad
// value is only a warning, with exit status 0.
func verifyUnit(t *testing.T, analyze, path string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, analyze, "verify", path)
	cmd.Env = append(cleanEnv(), "SYSTEMD_LOG_COLOR=0", "SYSTEMD_PAGER=")
	out, err := cmd.CombinedOutput()
	var complaints []string
	for line := range strings.Lines(string(out)) {
		if strings.Contains(line, path) || strings.Contains(line, filepath.Base(path)) {
			complaints = append(complaints, strings.TrimSpace(line))
		}
	}
	if err != nil || len(complaints) > 0 {
		t.Errorf("systemd-analyze verify %s: %v\nabout the unit:\n  %s\nwhole output:\n%s",
			path, err, strings.Join(complaints, "\n  "), out)
		return
	}
	t.Logf("systemd-analyze verify %s: exit 0, output %q", path, out)
}

// TestServiceUnitVerifies checks scripts/flyd.service: systemd accepts it
// without a warning, and it says what SPEC section 4 requires.
func TestServiceUnitVerifies(t *testing.T) {
	t.Parallel()
	requireRoot(t) // flydBin, which ExecStart must name, is built only as root
	analyze := requireTool(t, "systemd-analyze", "systemd")

	b, err := os.ReadFile(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	entries := parseUnit(t, string(b))

	// What the daemon's design depends on.
	for _, want := range []struct{ section, key, value, why string }{
		{"Service", "Type", "notify", "the daemon reports READY=1 once its API answers"},
		{"Service", "KillMode", "process", "workloads must survive a daemon restart"},
		{"Service", "Delegate", "yes", "the daemon manages its workloads' cgroups"},
		{"Service", "Restart", "on-failure", ""},
		{"Service", "RestartSec", "2", ""},
		{"Service", "RuntimeDirectory", "flyd", "/run/flyd"},
		{"Service", "StateDirectory", "flyd", "/var/lib/flyd"},
		{"Service", "RuntimeDirectoryPreserve", "yes", "otherwise systemd deletes /run/flyd, the live runs' state, whenever the daemon stops"},
		{"Install", "WantedBy", "multi-user.target", ""},
	} {
		got := lookup(entries, want.section, want.key)
		if len(got) != 1 || got[0] != want.value {
			t.Errorf("[%s] %s=%q, want exactly one %s=%s (%s)", want.section, want.key, got, want.key, want.value, want.why)
		}
	}
	// systemd lets the last assignment win; one is all there should be.
	execStart := lookup(entries, "Service", "ExecStart")
	if len(execStart) != 1 || execStart[0] != "/usr/local/bin/flyd daemon" {
		t.Errorf("ExecStart=%q, want one: /usr/local/bin/flyd daemon (scripts/install rewrites it for another PREFIX)", execStart)
	}
	if wants := strings.Join(lookup(entries, "Unit", "Wants"), " "); !strings.Contains(wants, "network-online.target") {
		t.Errorf("[Unit] Wants=%q, want network-online.target", wants)
	}
	after := strings.Join(lookup(entries, "Unit", "After"), " ")
	for _, u := range []string{"network-online.target", "containerd.service"} {
		if !strings.Contains(after, u) {
			t.Errorf("[Unit] After=%q, want %s", after, u)
		}
	}

	// No private mount namespace (nor another namespace or a filesystem
	// view of the daemon's own): isolated networks are bind mounts under
	// /run/flyd/netns that `flyd exec`, containerd and the next daemon
	// must see in the host's mount namespace, and workloads run with the
	// host's view of the filesystem and network.
	forbidden := map[string]bool{}
	for _, k := range strings.Fields(`PrivateTmp PrivateDevices PrivateMounts PrivateNetwork PrivateUsers PrivateIPC
		ProtectSystem ProtectHome ProtectKernelTunables ProtectKernelModules ProtectKernelLogs ProtectControlGroups
		ProtectProc ProcSubset ReadOnlyPaths ReadWritePaths InaccessiblePaths ExecPaths NoExecPaths
		ReadOnlyDirectories ReadWriteDirectories InaccessibleDirectories TemporaryFileSystem BindPaths
		BindReadOnlyPaths MountFlags MountAPIVFS RootDirectory RootImage MountImages ExtensionImages
		ExtensionDirectories NetworkNamespacePath JoinsNamespaceOf DynamicUser LogNamespace`) {
		forbidden[k] = true
	}
	for _, e := range entries {
		if forbidden[e.key] {
			t.Errorf("line %d: %s=%s makes a mount namespace or a filesystem view of its own: flyd's network namespaces would be invisible outside the daemon",
				e.line, e.key, e.value)
		}
	}

	// The arguments ExecStart gives the daemon are flags it knows: with
	// --help after them, an unknown one fails before the help is shown.
	if len(execStart) == 1 {
		args := strings.Fields(execStart[0])[1:]
		if _, errOut, code := runCmd(t, exec.CommandContext(t.Context(), flydBin, append(args, "--help")...)); code != 0 {
			t.Errorf("flyd %s --help: exit %d, want 0:\n%s", strings.Join(args, " "), code, errOut)
		}
	}

	// systemd-analyze checks that ExecStart's program exists: point it at
	// the binary under test, in a copy named like the installed unit.
	dir := t.TempDir()
	unit := filepath.Join(dir, "flyd.service")
	text := regexp.MustCompile(`(?m)^ExecStart=\S+`).ReplaceAllLiteralString(string(b), "ExecStart="+flydBin)
	if err := os.WriteFile(unit, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	verifyUnit(t, analyze, unit)
}

// scriptEnv is the environment for scripts/install and scripts/uninstall:
// the test's own without anything that would redirect them, plus kv.
func scriptEnv(kv ...string) []string {
	var env []string
	for _, e := range cleanEnv() {
		k, _, _ := strings.Cut(e, "=")
		switch {
		case k == "ROOT", k == "PREFIX", k == "SYSTEMD_DIR", strings.HasPrefix(k, "FLYD_"):
		default:
			env = append(env, e)
		}
	}
	return append(env, kv...)
}

// runScript runs one of the scripts to completion and fails the test unless
// it exits 0. It returns what the script printed.
func runScript(t *testing.T, script string, env []string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute) // a cold build
	defer cancel()
	cmd := exec.CommandContext(ctx, script, args...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", script, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// wantMode fails the test unless path exists, is a directory or a regular
// file as asked, and has the permissions perm.
func wantMode(t *testing.T, path string, dir bool, perm fs.FileMode) {
	t.Helper()
	fi, err := os.Lstat(path)
	switch {
	case err != nil:
		t.Error(err)
	case dir && !fi.IsDir(), !dir && !fi.Mode().IsRegular():
		t.Errorf("%s: %v, want a %s", path, fi.Mode().Type(), map[bool]string{true: "directory", false: "regular file"}[dir])
	case fi.Mode().Perm() != perm:
		t.Errorf("%s: mode %v, want %v", path, fi.Mode().Perm(), perm)
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func mustExist(t *testing.T, path string, exist bool) {
	t.Helper()
	_, err := os.Lstat(path)
	if exist && err != nil {
		t.Errorf("%s: %v, want it kept", path, err)
	}
	if !exist && err == nil {
		t.Errorf("%s still exists, want it removed", path)
	}
}

// TestInstallScript runs scripts/install (and scripts/uninstall) into
// temporary directories: the files, their modes, the rewritten unit, a
// config that is never overwritten, and an example config whose every line,
// uncommented, a daemon accepts. Nothing touches the host's /etc, /usr or
// systemd: ROOT (or every path) points into the test's directory, and the
// group and systemctl steps are off.
func TestInstallScript(t *testing.T) {
	t.Parallel()
	requireRoot(t) // flydBin; and without ROOT the script wants root
	repoUnit := mustRead(t, unitFile)
	wantVersion, _, _ := runCmd(t, exec.CommandContext(t.Context(), flydBin, "version"))

	t.Run("staging root", func(t *testing.T) {
		t.Parallel()
		root := t.TempDir()
		env := scriptEnv("ROOT="+root, "FLYD_BIN="+flydBin)
		out := runScript(t, installScript, env)
		t.Logf("scripts/install:\n%s", out)

		bin := filepath.Join(root, "usr/local/bin/flyd")
		daemonBin := filepath.Join(root, "usr/local/libexec/flyd/flyd-daemon")
		unit := filepath.Join(root, "etc/systemd/system/flyd.service")
		etc := filepath.Join(root, "etc/flyd")
		config := filepath.Join(etc, "flyd.yaml")
		wantMode(t, bin, false, 0o755)
		wantMode(t, daemonBin, false, 0o755)
		wantMode(t, filepath.Join(filepath.Dir(daemonBin), "flyd-log-holder"), false, 0o755)
		wantMode(t, filepath.Join(filepath.Dir(daemonBin), "flyd-compose"), false, 0o755)
		wantMode(t, unit, false, 0o644)
		wantMode(t, etc, true, 0o755)
		wantMode(t, filepath.Join(etc, "workloads.d"), true, 0o755)
		wantMode(t, config, false, 0o644)
		if got, errOut, code := runCmd(t, exec.CommandContext(t.Context(), bin, "version")); code != 0 || got != wantVersion {
			t.Errorf("installed flyd version: exit %d, %q (stderr %q); want %q", code, got, errOut, wantVersion)
		}
		// The default PREFIX is the unit's own: installed as it is.
		if got := mustRead(t, unit); got != repoUnit {
			t.Errorf("installed unit differs from scripts/flyd.service:\n%s", got)
		}
		example := mustRead(t, config)
		for line := range strings.Lines(example) {
			if s := strings.TrimSpace(line); s != "" && !strings.HasPrefix(s, "#") {
				t.Errorf("example config: %q is not commented out: an installed daemon must start with defaults", s)
			}
		}
		checkExampleConfig(t, example)

		// The admin's edits are the admin's: a second run keeps them, and
		// puts back a unit that was broken.
		edited := example + "log-level: debug\n"
		spec := filepath.Join(etc, "workloads.d", "web.yaml")
		for path, text := range map[string]string{config: edited, spec: "name: web\n", unit: "broken\n"} {
			if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		out = runScript(t, installScript, env)
		if got := mustRead(t, config); got != edited {
			t.Errorf("a second install changed the edited flyd.yaml:\n%s", got)
		}
		if !strings.Contains(out, "kept "+config) {
			t.Errorf("a second install does not say it kept %s:\n%s", config, out)
		}
		if got := mustRead(t, spec); got != "name: web\n" {
			t.Errorf("a second install changed workloads.d/web.yaml: %q", got)
		}
		if got := mustRead(t, unit); got != repoUnit {
			t.Errorf("a second install did not restore the unit:\n%s", got)
		}
		wantMode(t, bin, false, 0o755)
		_ = filepath.WalkDir(root, func(path string, _ fs.DirEntry, err error) error {
			if err == nil && strings.Contains(filepath.Base(path), ".new.") {
				t.Errorf("temporary file left behind: %s", path)
			}
			return err
		})

		// Uninstall keeps the config and the state; --purge removes them.
		state := filepath.Join(root, "var/lib/flyd")
		if err := os.MkdirAll(filepath.Join(state, "logs"), 0o700); err != nil {
			t.Fatal(err)
		}
		runScript(t, uninstallFile, env)
		mustExist(t, bin, false)
		mustExist(t, filepath.Dir(daemonBin), false)
		mustExist(t, unit, false)
		mustExist(t, config, true)
		mustExist(t, spec, true)
		mustExist(t, state, true)
		runScript(t, uninstallFile, env) // twice is fine
		runScript(t, uninstallFile, env, "--purge")
		mustExist(t, etc, false)
		mustExist(t, state, false)
	})

	t.Run("other paths", func(t *testing.T) {
		t.Parallel()
		// Without ROOT: the paths themselves move, and the unit names the
		// binary and the config where they are.
		base := t.TempDir()
		prefix, units, etc := filepath.Join(base, "opt"), filepath.Join(base, "units"), filepath.Join(base, "etc-flyd")
		out := runScript(t, installScript, scriptEnv("PREFIX="+prefix, "SYSTEMD_DIR="+units, "FLYD_CONFIG_DIR="+etc,
			"FLYD_BIN="+flydBin, "FLYD_INSTALL_SKIP_GROUP=1", "FLYD_INSTALL_NO_START=1"))
		t.Logf("scripts/install:\n%s", out)
		wantMode(t, filepath.Join(prefix, "bin/flyd"), false, 0o755)
		wantMode(t, filepath.Join(prefix, "libexec/flyd/flyd-daemon"), false, 0o755)
		wantMode(t, filepath.Join(prefix, "libexec/flyd/flyd-log-holder"), false, 0o755)
		wantMode(t, filepath.Join(prefix, "libexec/flyd/flyd-compose"), false, 0o755)
		wantMode(t, filepath.Join(etc, "workloads.d"), true, 0o755)
		wantMode(t, filepath.Join(etc, "flyd.yaml"), false, 0o644)
		unit := filepath.Join(units, "flyd.service")
		wantMode(t, unit, false, 0o644)
		want := "ExecStart=" + filepath.Join(prefix, "bin/flyd") + " daemon --config " + filepath.Join(etc, "flyd.yaml")
		text := mustRead(t, unit)
		if got := regexp.MustCompile(`(?m)^ExecStart=.*$`).FindAllString(text, -1); len(got) != 1 || got[0] != want {
			t.Errorf("installed unit: %q, want %q", got, want)
		}
		if strings.Replace(text, want, "ExecStart=/usr/local/bin/flyd daemon", 1) != repoUnit {
			t.Errorf("installed unit differs from scripts/flyd.service beyond ExecStart:\n%s", text)
		}
		// The rewritten unit is still one systemd accepts, binary included.
		verifyUnit(t, requireTool(t, "systemd-analyze", "systemd"), unit)
	})

	t.Run("build", func(t *testing.T) {
		t.Parallel()
		if testing.Short() {
			t.Skip("-short: building flyd takes a while; FLYD_BIN is tested above")
		}
		root := t.TempDir()
		runScript(t, installScript, scriptEnv("ROOT="+root))
		bin := filepath.Join(root, "usr/local/bin/flyd")
		wantMode(t, bin, false, 0o755)
		got, errOut, code := runCmd(t, exec.CommandContext(t.Context(), bin, "version"))
		if code != 0 || !strings.HasPrefix(got, "flyd ") || strings.TrimSpace(got) == "flyd" {
			t.Errorf("built flyd version: exit %d, %q (stderr %q); want flyd VERSION", code, got, errOut)
		}
		daemonBin := filepath.Join(root, "usr/local/libexec/flyd/flyd-daemon")
		for _, b := range []string{bin, daemonBin} {
			if out, err := exec.Command("file", b).Output(); err == nil && !bytes.Contains(out, []byte("statically linked")) {
				t.Errorf("built %s is not static (CGO_ENABLED=0): %s", b, out)
			}
		}
		// The installed flyd finds its daemon program where the script put
		// it, and both carry the same version.
		help, errOut, code := runCmd(t, exec.CommandContext(t.Context(), bin, "daemon", "--help"))
		if code != 0 || !strings.Contains(help+errOut, "-state-dir") {
			t.Errorf("installed flyd daemon --help: exit %d, %q %q; want the daemon's flags", code, help, errOut)
		}
	})
}

// checkExampleConfig uncomments every `# key: value` line of the example
// config: each key must be a daemon flag, each value its default as
// `flyd daemon --help` shows it, and a daemon must start with them all.
func checkExampleConfig(t *testing.T, example string) {
	t.Helper()
	keyLine := regexp.MustCompile(`^# ([a-z][a-z0-9-]*): (\S.*)$`)
	var (
		config strings.Builder
		keys   []string
		values = map[string]string{}
	)
	for line := range strings.Lines(example) {
		if m := keyLine.FindStringSubmatch(strings.TrimRight(line, "\n")); m != nil {
			fmt.Fprintf(&config, "%s: %s\n", m[1], m[2])
			keys = append(keys, m[1])
			values[m[1]] = m[2]
		}
	}
	if len(keys) < 10 {
		t.Fatalf("example config: %d keys %v, want every daemon flag's (10 or more)", len(keys), keys)
	}

	help, errOut, code := runCmd(t, exec.CommandContext(t.Context(), flydBin, "daemon", "--help"))
	help += errOut // the flag package prints its usage on stderr
	if code != 0 {
		t.Fatalf("flyd daemon --help: exit %d\n%s", code, help)
	}
	// Each flag is "  -name type" then its indented description, which ends
	// with (default "x") or (default 3) when the default is not the zero value
	// (a description's own "(default <state-dir>/...)" prose is not one).
	defaults, flags := map[string]string{}, map[string]bool{}
	flagLine := regexp.MustCompile(`^  -([a-z0-9-]+)`)
	defaultOf := regexp.MustCompile(`\(default (?:"([^"]*)"|([^)"\s]*))\)$`)
	current := ""
	for line := range strings.Lines(help) {
		line = strings.TrimRight(line, "\n")
		if m := flagLine.FindStringSubmatch(line); m != nil {
			current = m[1]
			flags[current] = true
			continue
		}
		if m := defaultOf.FindStringSubmatch(line); m != nil && current != "" {
			defaults[current] = m[1] + m[2]
		}
	}
	for _, k := range keys {
		if !flags[k] {
			t.Errorf("example config key %q is not a flag of flyd daemon:\n%s", k, help)
			continue
		}
		if d, ok := defaults[k]; ok && d != values[k] {
			t.Errorf("example config: %s: %s, but the flag's default is %q", k, values[k], d)
		}
	}

	// Uncommented, the whole example is a config a daemon starts with.
	// startDaemon's flags win over the file's paths; the registry key is
	// the one path left to redirect.
	path := filepath.Join(t.TempDir(), "flyd.yaml")
	if err := os.WriteFile(path, []byte(config.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, withArgs("--config", path, "--registry-key-file", filepath.Join(t.TempDir(), "registry.key")))
	d.terminate(t)
}

// TestDaemonProgram: `flyd daemon` execs the flyd-daemon beside it, and
// refuses one that someone who could not change flyd itself could change:
// run as root, it would run what they put there.
func TestDaemonProgram(t *testing.T) {
	t.Parallel()
	requireRoot(t) // the copies are given to another user
	dir := t.TempDir()
	bin, daemonBin := filepath.Join(dir, "flyd"), filepath.Join(dir, "flyd-daemon")
	// Copies, not links: the modes and owners changed below are their own.
	cp := func(from, to string) {
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cp(flydBin, bin)
	daemonHelp := func() (string, int) {
		out, errOut, code := runCmd(t, exec.CommandContext(t.Context(), bin, "daemon", "--help"))
		return out + errOut, code
	}

	if out, code := daemonHelp(); code != 1 || !strings.Contains(out, "the daemon program flyd-daemon is in neither") {
		t.Errorf("without flyd-daemon: exit %d, %q; want 1 and where it was looked for", code, out)
	}
	cp(filepath.Join(filepath.Dir(flydBin), "flyd-daemon"), daemonBin)
	if out, code := daemonHelp(); code != 0 || !strings.Contains(out, "-state-dir") {
		t.Errorf("beside flyd: exit %d, %q; want the daemon's flags", code, out)
	}
	if err := os.Chown(daemonBin, 65534, -1); err != nil {
		t.Fatal(err)
	}
	if out, code := daemonHelp(); code != 1 || !strings.Contains(out, "refusing the daemon program") || !strings.Contains(out, "owned by uid 65534") {
		t.Errorf("flyd-daemon owned by another user: exit %d, %q; want 1 and the reason", code, out)
	}
	if err := os.Chown(daemonBin, 0, -1); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(daemonBin, 0o777); err != nil {
		t.Fatal(err)
	}
	if out, code := daemonHelp(); code != 1 || !strings.Contains(out, "writable by group or others") {
		t.Errorf("flyd-daemon writable by all: exit %d, %q; want 1 and the reason", code, out)
	}
}
