package spec

import (
	"fmt"
	"strings"
	"testing"
)

// valid returns a workload that passes Validate and uses every section, so
// each case below breaks exactly one rule.
func valid() *Workload {
	w := example()
	w.Endpoints = append(w.Endpoints, Endpoint{Name: "admin", Port: FixedPort(9000)})
	w.SetDefaults()
	return w
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		change func(w *Workload)
		fields []string
	}{
		{"valid", func(w *Workload) {}, nil},
		{"name missing", func(w *Workload) { w.Name = "" }, []string{"name"}},
		{"name upper case", func(w *Workload) { w.Name = "Api" }, []string{"name"}},
		{"name trailing dash", func(w *Workload) { w.Name = "api-" }, []string{"name"}},
		{"name too long", func(w *Workload) { w.Name = strings.Repeat("a", 64) }, []string{"name"}},
		{"name 63 long", func(w *Workload) { w.Name = strings.Repeat("a", 63) }, nil},
		{"kind unknown", func(w *Workload) { w.Kind = "docker" }, []string{"kind"}},
		{"nix missing", func(w *Workload) { w.Kind = KindNix }, []string{"nix"}},
		{"nix flake", func(w *Workload) { w.Kind, w.Nix = KindNix, &Nix{Flake: "path:/srv", Shell: "default"} }, nil},
		{"nix package", func(w *Workload) { w.Kind, w.Nix = KindNix, &Nix{Package: "path:/srv#hello"} }, nil},
		{"nix both", func(w *Workload) { w.Kind, w.Nix = KindNix, &Nix{Flake: "a", Package: "b"} }, []string{"nix"}},
		{"nix neither", func(w *Workload) { w.Kind, w.Nix = KindNix, &Nix{} }, []string{"nix"}},
		{"nix shell with package", func(w *Workload) { w.Kind, w.Nix = KindNix, &Nix{Package: "b", Shell: "x"} }, []string{"nix.shell"}},
		{"nix block on native", func(w *Workload) { w.Nix = &Nix{Flake: "a"} }, []string{"nix"}},
		{"nix needs command", func(w *Workload) { w.Kind, w.Nix, w.Command = KindNix, &Nix{Flake: "a"}, nil }, []string{"command"}},
		{"containerd image", func(w *Workload) { w.Kind, w.Containerd = KindContainerd, &Containerd{Image: "bbox"} }, nil},
		{"containerd without command", func(w *Workload) {
			w.Kind, w.Containerd, w.Command = KindContainerd, &Containerd{Image: "bbox"}, nil
		}, nil},
		{"containerd missing", func(w *Workload) { w.Kind = KindContainerd }, []string{"containerd.image"}},
		{"containerd without image", func(w *Workload) { w.Kind, w.Containerd = KindContainerd, &Containerd{Archive: "/a.tar"} }, []string{"containerd.image"}},
		{"containerd block on native", func(w *Workload) { w.Containerd = &Containerd{Image: "bbox"} }, []string{"containerd"}},
		{"command missing", func(w *Workload) { w.Command = nil }, []string{"command"}},
		{"command empty program", func(w *Workload) { w.Command = []string{""} }, []string{"command[0]"}},
		{"command NUL", func(w *Workload) { w.Command = []string{"/bin/a", "b\x00"} }, []string{"command[1]"}},
		{"command empty argument", func(w *Workload) { w.Command = []string{"/bin/a", ""} }, nil},
		{"workdir relative", func(w *Workload) { w.Workdir = "srv" }, []string{"workdir"}},
		{"user with group", func(w *Workload) { w.User = "www:www" }, []string{"user"}},
		{"user blank", func(w *Workload) { w.User = " " }, []string{"user"}},
		{"user numeric", func(w *Workload) { w.User = "1000" }, nil},
		{"env key with space", func(w *Workload) { w.Env["FOO BAR"] = "x" }, []string{"env.FOO BAR"}},
		{"env key with digit first", func(w *Workload) { w.Env["1X"] = "x" }, []string{"env.1X"}},
		{"env value NUL", func(w *Workload) { w.Env["X"] = "a\x00b" }, []string{"env.X"}},
		{"secret key bad", func(w *Workload) { w.SecretEnv["A-B"] = "x" }, []string{"secret_env.A-B"}},
		{"secret also in env", func(w *Workload) { w.Env["DB_PASSWORD"] = "x" }, []string{"secret_env.DB_PASSWORD"}},
		{"profiles", func(w *Workload) { w.Profiles = []string{"debug", "ci-7"} }, nil},
		{"profile not a label", func(w *Workload) { w.Profiles = []string{"debug", "Dev_1"} }, []string{"profiles[1]"}},
		{"profile twice", func(w *Workload) { w.Profiles = []string{"debug", "debug"} }, []string{"profiles[1]"}},
		{"env_file", func(w *Workload) { w.EnvFile = StringList{"app.env", "../shared.env"} }, nil},
		{"env_file empty", func(w *Workload) { w.EnvFile = StringList{""} }, []string{"env_file[0]"}},
		{"endpoint name", func(w *Workload) { w.Endpoints[1].Name = "Admin" }, []string{"endpoints[1].name"}},
		{"endpoint duplicate", func(w *Workload) { w.Endpoints[1].Name = "http" }, []string{"endpoints[1].name"}},
		{"endpoint api", func(w *Workload) { w.Endpoints[0].API = "soap" }, []string{"endpoints[0].api"}},
		{"endpoint port zero", func(w *Workload) { w.Endpoints[1].Port = FixedPort(0) }, []string{"endpoints[1].port"}},
		{"endpoint port too big", func(w *Workload) { w.Endpoints[1].Port = FixedPort(65536) }, []string{"endpoints[1].port"}},
		{"endpoint port mode", func(w *Workload) { w.Endpoints[1].Port = Port{Mode: "random"} }, []string{"endpoints[1].port"}},
		{"endpoint port shared", func(w *Workload) { w.Endpoints[0].Port = FixedPort(9000) }, []string{"endpoints[1].port"}},
		{"network isolated", func(w *Workload) { w.Network = "backend" }, nil},
		{"publish on host", func(w *Workload) { w.Endpoints[0].Publish = Port{Mode: PortHashed} }, []string{"endpoints[0].publish"}},
		{"publish isolated", func(w *Workload) { w.Network, w.Endpoints[0].Publish = "backend", FixedPort(8080) }, nil},
		{"publish too big", func(w *Workload) { w.Network, w.Endpoints[0].Publish = "backend", FixedPort(70000) }, []string{"endpoints[0].publish"}},
		{"network bad", func(w *Workload) { w.Network = "Back_End" }, []string{"network"}},
		{"restart policy", func(w *Workload) { w.Restart.Policy = "sometimes" }, []string{"restart.policy"}},
		{"restart unlimited", func(w *Workload) { w.Restart.MaxRestarts = UnlimitedRestarts }, nil},
		{"restart max negative", func(w *Workload) { w.Restart.MaxRestarts = -2 }, []string{"restart.max_restarts"}},
		{"restart window", func(w *Workload) { w.Restart.Window = dur("-1s") }, []string{"restart.window"}},
		{"backoff initial", func(w *Workload) { w.Restart.Backoff.Initial = Duration{} }, []string{"restart.backoff.initial"}},
		{"backoff max below initial", func(w *Workload) { w.Restart.Backoff.Max = dur("100ms") }, []string{"restart.backoff.max"}},
		{"stop signal", func(w *Workload) { w.Stop.Signal = "SIGNOPE" }, []string{"stop.signal"}},
		{"stop timeout", func(w *Workload) { w.Stop.Timeout = dur("-1s") }, []string{"stop.timeout"}},
		{"stop timeout endless", func(w *Workload) { w.Stop.Timeout = dur("1000000h") }, []string{"stop.timeout"}},
		{"stop timeout an hour", func(w *Workload) { w.Stop.Timeout = dur("1h") }, nil},
		{"stop exec", func(w *Workload) { w.Stop.Exec = []string{"redis-cli", "shutdown"} }, nil},
		{"stop exec empty program", func(w *Workload) { w.Stop.Exec = []string{"", "shutdown"} }, []string{"stop.exec[0]"}},
		{"stop exec in a container", func(w *Workload) {
			w.Kind, w.Containerd, w.Stop.Exec = KindContainerd, &Containerd{Image: "bbox"}, []string{"redis-cli", "shutdown"}
		}, []string{"stop.exec"}},
		{"forking", func(w *Workload) { w.Forking = &Forking{PIDFile: "/run/redis/redis.pid", Timeout: dur("30s")} }, nil},
		{"forking without pid file", func(w *Workload) { w.Forking = &Forking{Timeout: dur("30s")} }, []string{"forking.pid_file"}},
		{"forking relative pid file", func(w *Workload) { w.Forking = &Forking{PIDFile: "run/redis.pid", Timeout: dur("30s")} }, []string{"forking.pid_file"}},
		{"forking unclean pid file", func(w *Workload) { w.Forking = &Forking{PIDFile: "/run/../etc/x.pid", Timeout: dur("30s")} }, []string{"forking.pid_file"}},
		{"forking timeout", func(w *Workload) { w.Forking = &Forking{PIDFile: "/run/x.pid", Timeout: dur("-1s")} }, []string{"forking.timeout"}},
		{"forking in a container", func(w *Workload) {
			w.Kind, w.Containerd, w.Forking = KindContainerd, &Containerd{Image: "bbox"}, &Forking{PIDFile: "/run/x.pid", Timeout: dur("30s")}
		}, []string{"forking"}},
		{"forking replicated", func(w *Workload) {
			w.Replicas, w.Endpoints, w.Health, w.Forking = 2, nil, nil, &Forking{PIDFile: "/run/x.pid", Timeout: dur("30s")}
		}, []string{"forking"}},
		{"backoff initial 1ns", func(w *Workload) { w.Restart.Backoff.Initial, w.Restart.Backoff.Max = dur("1ns"), dur("1ns") }, []string{"restart.backoff.initial"}},
		{"health interval 1ns", func(w *Workload) { w.Health.Interval = dur("1ns") }, []string{"health.interval"}},
		{"health none", func(w *Workload) { w.Health.HTTP = nil }, []string{"health"}},
		{"health two", func(w *Workload) { w.Health.TCP = "http" }, []string{"health"}},
		{"health tcp", func(w *Workload) { w.Health.HTTP, w.Health.TCP = nil, "admin" }, nil},
		{"health tcp endpoint", func(w *Workload) { w.Health.HTTP, w.Health.TCP = nil, "nope" }, []string{"health.tcp"}},
		{"health tcp exchange", func(w *Workload) {
			w.Health.HTTP, w.Health.TCP, w.Health.Send, w.Health.Expect = nil, "admin", "PING\r\n", "+PONG"
		}, nil},
		{"health tcp greeting", func(w *Workload) { w.Health.HTTP, w.Health.TCP, w.Health.Expect = nil, "admin", "SSH-2.0-" }, nil},
		{"health send alone", func(w *Workload) { w.Health.HTTP, w.Health.TCP, w.Health.Send = nil, "admin", "PING\r\n" }, []string{"health.expect"}},
		{"health expect without tcp", func(w *Workload) { w.Health.Expect = "+PONG" }, []string{"health.expect"}},
		{"health send too long", func(w *Workload) {
			w.Health.HTTP, w.Health.TCP, w.Health.Send, w.Health.Expect = nil, "admin", strings.Repeat("x", MaxTCPExchange+1), "+"
		}, []string{"health.send"}},
		{"health http endpoint", func(w *Workload) { w.Health.HTTP.Endpoint = "nope" }, []string{"health.http.endpoint"}},
		{"health http path", func(w *Workload) { w.Health.HTTP.Path = "healthz" }, []string{"health.http.path"}},
		{"health http expect", func(w *Workload) { w.Health.HTTP.Expect = 1000 }, []string{"health.http.expect"}},
		{"health exec", func(w *Workload) { w.Health.HTTP, w.Health.Exec = nil, []string{"/bin/check"} }, nil},
		{"health exec empty program", func(w *Workload) { w.Health.HTTP, w.Health.Exec = nil, []string{""} }, []string{"health.exec[0]"}},
		{"health interval", func(w *Workload) { w.Health.Interval = Duration{} }, []string{"health.interval"}},
		{"health timeout", func(w *Workload) { w.Health.Timeout = dur("-1s") }, []string{"health.timeout"}},
		{"health failures", func(w *Workload) { w.Health.Failures = 0 }, []string{"health.failures"}},
		{"health start period", func(w *Workload) { w.Health.StartPeriod = dur("-1s") }, []string{"health.start_period"}},
		{"health log", func(w *Workload) { w.Health.HTTP, w.Health.Log = nil, "ready to accept connections" }, nil},
		{"health log and http", func(w *Workload) { w.Health.Log = "ready" }, []string{"health"}},
		{"health log not compiling", func(w *Workload) { w.Health.HTTP, w.Health.Log = nil, "ready (to" }, []string{"health.log"}},
		{"health log too long", func(w *Workload) { w.Health.HTTP, w.Health.Log = nil, strings.Repeat("a", MaxLogPattern+1) }, []string{"health.log"}},
		{"health watchdog", func(w *Workload) { w.Health.HTTP, w.Health.Notify, w.Health.Watchdog = nil, true, dur("10s") }, nil},
		{"health watchdog without notify", func(w *Workload) { w.Health.Watchdog = dur("10s") }, []string{"health.watchdog"}},
		{"health watchdog below 100ms", func(w *Workload) { w.Health.HTTP, w.Health.Notify, w.Health.Watchdog = nil, true, dur("99ms") }, []string{"health.watchdog"}},
		{"health watchdog negative", func(w *Workload) { w.Health.HTTP, w.Health.Notify, w.Health.Watchdog = nil, true, dur("-1s") }, []string{"health.watchdog"}},
		{"memory negative", func(w *Workload) { w.Resources.MemoryMax = -1 }, []string{"resources.memory_max"}},
		{"cpu max word", func(w *Workload) { w.Resources.CPUMax = "half" }, []string{"resources.cpu_max"}},
		{"cpu max zero", func(w *Workload) { w.Resources.CPUMax = "0" }, []string{"resources.cpu_max"}},
		{"cpu max NaN", func(w *Workload) { w.Resources.CPUMax = "NaN" }, []string{"resources.cpu_max"}},
		{"cpu max beyond any machine", func(w *Workload) { w.Resources.CPUMax = "1e308" }, []string{"resources.cpu_max"}},
		{"cpu max below the kernel's quota", func(w *Workload) { w.Resources.CPUMax = "0.001" }, []string{"resources.cpu_max"}},
		{"cpu max two cores", func(w *Workload) { w.Resources.CPUMax = "2" }, nil},
		{"cpu weight", func(w *Workload) { w.Resources.CPUWeight = 10001 }, []string{"resources.cpu_weight"}},
		{"pids negative", func(w *Workload) { w.Resources.PidsMax = -1 }, []string{"resources.pids_max"}},
		{"after bad name", func(w *Workload) { w.After = []string{"Postgres"} }, []string{"after[0]"}},
		{"after itself", func(w *Workload) { w.After = []string{"api-server"} }, []string{"after[0]"}},
		{"after duplicate", func(w *Workload) { w.After = []string{"db", "cache", "db"} }, []string{"after[2]"}},
		{"registry ttl", func(w *Workload) { w.Registry.TTL = dur("-1s") }, []string{"registry.ttl"}},
		{"registry empty tag", func(w *Workload) { w.Registry.Tags = []string{"a", " "} }, []string{"registry.tags[1]"}},
		{"several at once", func(w *Workload) { w.Name, w.Workdir = "", "x" }, []string{"name", "workdir"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := valid()
			tt.change(w)
			err := w.Validate()
			if tt.fields == nil {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			wantFieldError(t, err, tt.fields)
		})
	}
}

func TestValidateNeverShowsSecrets(t *testing.T) {
	const secret = "hunter2-\x00-value"
	tests := []struct {
		name string
		src  string
	}{
		{"bad key", minimal + "secret_env: {\"BAD KEY\": \"hunter2-value\"}\n"},
		{"NUL in value", minimal + "secret_env: {GOOD: \"hunter2-\\0-value\"}\n"},
		{"list as value", minimal + "secret_env: {GOOD: [hunter2-value]}\n"},
		{"string as map", minimal + "secret_env: hunter2-value\n"},
		{"clash with env", minimal + "env: {K: a}\nsecret_env: {K: hunter2-value}\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.src))
			if err == nil {
				t.Fatal("no error")
			}
			if len(fieldsOf(err)) == 0 || !strings.HasPrefix(fieldsOf(err)[0], "secret_env") {
				t.Errorf("error %q is not about secret_env", err)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("error %q shows the secret", err)
			}
		})
	}
	w := valid()
	w.SecretEnv["X"] = secret
	if err := w.Validate(); err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("Validate() = %v, want an error without the secret", err)
	}
}

// TestProblemsAreCapped: a spec with 60,000 bad keys gets MaxProblems
// problems, each with its line, and a count of the rest.
func TestProblemsAreCapped(t *testing.T) {
	var b strings.Builder
	b.WriteString("{\"name\": \"app\", \"command\": [\"x\"], \"env\": {\n")
	for i := range 60000 {
		if i > 0 {
			b.WriteString(",\n")
		}
		fmt.Fprintf(&b, "\"bad-%d\": \"v\"", i)
	}
	b.WriteString("}}")
	_, err := DecodeJSON(strings.NewReader(b.String()))
	if err == nil {
		t.Fatal("60,000 bad keys accepted")
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != MaxProblems+1 || lines[MaxProblems] != fmt.Sprintf("and %d more problems", 60000-MaxProblems) {
		t.Fatalf("%d lines, last %q", len(lines), lines[len(lines)-1])
	}
	if !strings.HasPrefix(lines[0], "line 2: env.bad-0:") {
		t.Errorf("first problem %q, want its line and field", lines[0])
	}
}

// TestValidateLogPattern: a log check's pattern that does not compile is
// refused saying what is wrong, without quoting the pattern.
func TestValidateLogPattern(t *testing.T) {
	w := valid()
	w.Health.HTTP, w.Health.Log = nil, "ready (hunter2"
	err := w.Validate()
	wantFieldError(t, err, []string{"health.log"})
	if msg := err.Error(); !strings.Contains(msg, "missing closing )") || strings.Contains(msg, "hunter2") {
		t.Errorf("error %q", msg)
	}
}
