package spec

import (
	"reflect"
	"testing"
)

func TestSetDefaults(t *testing.T) {
	w := parseOne(t, minimal+"endpoints: [{name: http}]\nhealth: {http: {endpoint: http}}\nregistry: {}\nstop: {signal: term}\n")
	want := &Workload{
		Name:      "app",
		Kind:      KindNative,
		Command:   []string{"/bin/app"},
		Endpoints: []Endpoint{{Name: "http", API: "http", Port: Port{Mode: PortHashed}}}, // named like an API: serves it, as in codefly,
		Network:   NetworkHost,
		Restart: Restart{Policy: RestartOnFailure, MaxRestarts: 5, Window: dur("1m"),
			Backoff: Backoff{Initial: dur("250ms"), Max: dur("30s")}},
		Stop: Stop{Signal: "SIGTERM", Timeout: dur("10s"), Mode: StopGroup},
		Health: &Health{HTTP: &HTTPCheck{Endpoint: "http", Path: "/", Expect: 200},
			Interval: dur("2s"), Timeout: dur("1s"), Failures: 3},
		Registry: &Registry{TTL: dur("30s")},
	}
	if !reflect.DeepEqual(w, want) {
		t.Errorf("got  %+v\nwant %+v", w, want)
	}
	again := w.Clone()
	again.SetDefaults()
	if !reflect.DeepEqual(again, w) {
		t.Errorf("SetDefaults is not idempotent: %+v", again)
	}
}

func TestSetDefaultsCases(t *testing.T) {
	tests := []struct {
		name  string
		extra string
		check func(w *Workload) bool
	}{
		{"no optional blocks", "", func(w *Workload) bool {
			return w.Health == nil && w.Registry == nil && w.Resources == nil && w.Nix == nil
		}},
		{"explicit values kept", "restart: {policy: always, max_restarts: 2, window: 5m, backoff: {initial: 1s, max: 2s}}\n", func(w *Workload) bool {
			return w.Restart == Restart{Policy: RestartAlways, MaxRestarts: 2, Window: dur("5m"), Backoff: Backoff{Initial: dur("1s"), Max: dur("2s")}}
		}},
		{"unlimited restarts kept", "restart: {max_restarts: -1}\n", func(w *Workload) bool {
			return w.Restart.MaxRestarts == UnlimitedRestarts
		}},
		{"backoff max follows a long initial", "restart: {backoff: {initial: 1m}}\n", func(w *Workload) bool {
			return w.Restart.Backoff.Max == dur("1m")
		}},
		{"signal number named", "stop: {signal: \"9\"}\n", func(w *Workload) bool { return w.Stop.Signal == "SIGKILL" }},
		{"fixed port kept", "endpoints: [{name: a, port: 8080, api: grpc}]\n", func(w *Workload) bool {
			return w.Endpoints[0] == Endpoint{Name: "a", API: "grpc", Port: FixedPort(8080)}
		}},
		{"nix flake shell", "kind: nix\nnix: {flake: \"path:/srv\"}\n", func(w *Workload) bool { return w.Nix.Shell == "default" }},
		{"nix package has no shell", "kind: nix\nnix: {package: \"path:/srv#x\"}\n", func(w *Workload) bool { return w.Nix.Shell == "" }},
		{"empty collections are nil", "env: {}\nafter: []\nendpoints: []\n", func(w *Workload) bool {
			return w.Env == nil && w.After == nil && w.Endpoints == nil
		}},
		{"a log check's timeout is a minute", "health: {log: \"ready\"}\n", func(w *Workload) bool {
			return w.Health.Timeout == dur("1m") && w.Health.Interval == dur("2s")
		}},
		{"a log check's timeout kept", "health: {log: \"ready\", timeout: 5s}\n", func(w *Workload) bool { return w.Health.Timeout == dur("5s") }},
		{"a watchdog parsed", "health: {notify: true, watchdog: 10s}\n", func(w *Workload) bool {
			return w.Health.Watchdog == dur("10s") && w.Health.Timeout == dur("1s")
		}},
		{"null is unset", "health: null\nrestart: ~\n", func(w *Workload) bool {
			return w.Health == nil && w.Restart.MaxRestarts == 5
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if w := parseOne(t, minimal+tt.extra); !tt.check(w) {
				t.Errorf("unexpected result: %+v", w)
			}
		})
	}
}
