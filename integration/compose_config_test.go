package integration

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// TestComposeConfigBesideDockerCompose: the shop's compose file and its
// override file, resolved by flyd (`flyd config --format compose`) and by
// Debian's docker-compose 1.29 (`docker-compose config`, which needs no
// engine), give the same services field by field: images, commands and
// entrypoints, environment after .env's interpolation and the override's
// merge, ports, expose, volumes (the binds made absolute), depends_on's
// conditions, healthchecks, restart, stop_signal and stop_grace_period,
// working_dir, replicas and profiles.
//
// What 1.29 does not know is left out: the top-level name: (1.29 takes
// -p, so its copy of the file has none), depends_on's restart: and
// required:, develop.watch, healthcheck.start_interval, and extensions
// (1.29 reads a service's x-flyd and prints none of it). 1.29 prints the
// services of every profile; flyd, like docker compose v2, prints those
// of the profiles asked for, so flyd's side is read with --profile '*',
// and without it once to see debug left out. The networks' and volumes'
// engine names (shop_default) are docker's and not compared.
func TestComposeConfigBesideDockerCompose(t *testing.T) {
	t.Parallel()
	dc := need(t, "docker-compose", "docker-compose")
	dir := writeShop(t, t.TempDir(), "127.0.0.1:5000", "/usr/lib/postgresql/15/bin")
	override := filepath.Join(dir, "compose.override.yaml")

	// 1.29's copy of the file, without what 1.29 refuses.
	base, err := os.ReadFile(filepath.Join(dir, "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	v1 := string(base)
	for _, cut := range []string{"name: shop\n", ", restart: true"} {
		if !strings.Contains(v1, cut) {
			t.Fatalf("the shop's compose file has no %q to leave out for docker-compose 1.29", cut)
		}
		v1 = strings.Replace(v1, cut, "", 1)
	}
	v1File := filepath.Join(dir, "compose.v1.yaml")
	if err := os.WriteFile(v1File, []byte(v1), 0o644); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run := func(argv ...string) []byte {
		t.Helper()
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmd.Dir = dir
		cmd.Env = cleanEnv()
		var errOut strings.Builder
		cmd.Stderr = &errOut
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, errOut.String())
		}
		return out
	}
	theirs := composeServices(t, "docker-compose config", run(dc, "-p", "shop", "-f", v1File, "-f", override, "config"))
	ours := composeServices(t, "flyd config --format compose", run(flydBin, "config", "--format", "compose", "--profile", "*", "-f", filepath.Join(dir, "compose.yaml"), "-f", override))

	if a, b := slices.Sorted(maps.Keys(ours)), slices.Sorted(maps.Keys(theirs)); !slices.Equal(a, b) {
		t.Fatalf("services: flyd %v, docker-compose %v", a, b)
	}
	for _, name := range slices.Sorted(maps.Keys(ours)) {
		o, d := ours[name], theirs[name]
		for _, f := range slices.Sorted(maps.Keys(mergeKeys(o, d))) {
			if o[f] != d[f] {
				t.Errorf("service %s: %s: flyd %s, docker-compose %s", name, f, o[f], d[f])
			}
		}
	}
	// A field both must have read, so that an empty comparison cannot pass.
	if got := ours["web"]["environment"]; got != "GREETING=from-override PGHOST=127.0.0.1 PGUSER=postgres REDIS_HOST=127.0.0.1" {
		t.Errorf("web's environment: %s", got)
	}

	// Profiles: debug is printed only once its profile is asked for.
	plain := composeServices(t, "flyd config --format compose", run(flydBin, "config", "--format", "compose", "-f", filepath.Join(dir, "compose.yaml"), "-f", override))
	withDebug := composeServices(t, "flyd config --format compose --profile debug", run(flydBin, "config", "--format", "compose", "--profile", "debug", "-f", filepath.Join(dir, "compose.yaml"), "-f", override))
	if _, ok := plain["debug"]; ok || len(plain) != len(ours)-1 {
		t.Errorf("without --profile: %v; want every service but debug", slices.Sorted(maps.Keys(plain)))
	}
	if _, ok := withDebug["debug"]; !ok {
		t.Errorf("--profile debug: %v; want debug in", slices.Sorted(maps.Keys(withDebug)))
	}
}

func mergeKeys(a, b map[string]string) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

// composeServices reads a `config` output's services, each field both
// tools understand written one way: lists joined, durations parsed,
// short and long syntaxes made one.
func composeServices(t *testing.T, what string, out []byte) map[string]map[string]string {
	t.Helper()
	var doc struct {
		Services map[string]map[string]any `yaml:"services"`
	}
	if err := yaml.Unmarshal(out, &doc); err != nil {
		t.Fatalf("%s: %v\n%s", what, err, out)
	}
	if len(doc.Services) == 0 {
		t.Fatalf("%s printed no services:\n%s", what, out)
	}
	services := map[string]map[string]string{}
	for name, svc := range doc.Services {
		f := map[string]string{}
		set := func(key, value string) {
			if value != "" {
				f[key] = value
			}
		}
		for _, k := range []string{"image", "restart", "working_dir", "user", "stop_signal"} {
			set(k, scalar(svc[k]))
		}
		for _, k := range []string{"command", "entrypoint", "expose", "profiles"} {
			set(k, list(svc[k]))
		}
		set("stop_grace_period", duration(svc["stop_grace_period"]))
		if env, ok := svc["environment"].(map[string]any); ok {
			var kv []string
			for _, k := range slices.Sorted(maps.Keys(env)) {
				kv = append(kv, k+"="+scalar(env[k]))
			}
			set("environment", strings.Join(kv, " "))
		}
		if deps, ok := svc["depends_on"].(map[string]any); ok {
			var ds []string
			for _, k := range slices.Sorted(maps.Keys(deps)) {
				cond, _ := deps[k].(map[string]any)
				ds = append(ds, k+":"+scalar(cond["condition"]))
			}
			set("depends_on", strings.Join(ds, " "))
		}
		if hc, ok := svc["healthcheck"].(map[string]any); ok {
			set("healthcheck", fmt.Sprintf("test=%s interval=%s timeout=%s start_period=%s retries=%s",
				list(hc["test"]), duration(hc["interval"]), duration(hc["timeout"]), duration(hc["start_period"]), scalar(hc["retries"])))
		}
		if deploy, ok := svc["deploy"].(map[string]any); ok {
			set("deploy.replicas", scalar(deploy["replicas"]))
		}
		var ports []string
		for _, p := range items(svc["ports"]) {
			switch p := p.(type) {
			case map[string]any:
				proto := scalar(p["protocol"])
				if proto == "" {
					proto = "tcp"
				}
				ports = append(ports, fmt.Sprintf("%s:%s/%s", scalar(p["published"]), scalar(p["target"]), proto))
			default:
				ports = append(ports, scalar(p))
			}
		}
		set("ports", strings.Join(ports, " "))
		var vols []string
		for _, v := range items(svc["volumes"]) {
			switch v := v.(type) {
			case map[string]any:
				mode := "rw"
				if v["read_only"] == true {
					mode = "ro"
				}
				vols = append(vols, fmt.Sprintf("%s:%s:%s", scalar(v["source"]), scalar(v["target"]), mode))
			default:
				s := scalar(v)
				if strings.Count(s, ":") == 1 {
					s += ":rw"
				}
				vols = append(vols, s)
			}
		}
		set("volumes", strings.Join(vols, " "))
		services[name] = f
	}
	return services
}

func items(v any) []any {
	l, _ := v.([]any)
	return l
}

func scalar(v any) string {
	if v == nil {
		return ""
	}
	return fmt.Sprint(v)
}

func list(v any) string {
	l, ok := v.([]any)
	if !ok {
		return scalar(v)
	}
	var s []string
	for _, x := range l {
		s = append(s, fmt.Sprintf("%q", scalar(x)))
	}
	return "[" + strings.Join(s, " ") + "]"
}

// duration is a duration written either tool's way ("20s", "1m30s"), or
// as it is when it is none.
func duration(v any) string {
	s := scalar(v)
	if d, err := time.ParseDuration(s); err == nil {
		return d.String()
	}
	return s
}
