package integration

import (
	"bufio"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flyd-dev/flyd/registryclient"
)

// confRegistry is one `flyd registry serve` process of the conformance test.
type confRegistry struct {
	cmd     *exec.Cmd
	done    chan struct{}
	logPath string
	url     string
}

// confBinary is the flyd binary. TestMain builds it only as root; the
// registry needs no root, so without it the test builds its own.
func confBinary(t *testing.T) string {
	t.Helper()
	if flydBin != "" {
		return flydBin
	}
	dir := t.TempDir()
	if err := build(dir); err != nil {
		t.Fatalf("building flyd: %v", err)
	}
	return filepath.Join(dir, "flyd")
}

// startConfRegistry starts `flyd registry serve` on a free loopback port and
// returns once it listens: its log says where.
func startConfRegistry(t *testing.T, bin, dir string, args ...string) *confRegistry {
	t.Helper()
	n, _ := filepath.Glob(filepath.Join(dir, "registry-*.log"))
	r := &confRegistry{done: make(chan struct{}), logPath: filepath.Join(dir, fmt.Sprintf("registry-%d.log", len(n)+1))}
	logFile, err := os.Create(r.logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	r.cmd = exec.Command(bin, append([]string{"registry", "serve", "--listen", "127.0.0.1:0"}, args...)...)
	r.cmd.Env = cleanEnv()
	r.cmd.Stdout, r.cmd.Stderr = logFile, logFile
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = r.cmd.Wait(); close(r.done) }()
	t.Cleanup(func() {
		_ = r.cmd.Process.Kill()
		<-r.done
	})
	eventually(t, "the registry listening", func() error {
		select {
		case <-r.done:
			t.Fatalf("flyd registry serve exited (%v):\n%s", r.cmd.ProcessState, r.log(t))
		default:
		}
		sc := bufio.NewScanner(strings.NewReader(r.log(t)))
		for sc.Scan() {
			var line struct{ Msg, Addr string }
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "registry listening" {
				r.url = "http://" + line.Addr
				return nil
			}
		}
		return errors.New("no \"registry listening\" line in its log yet")
	})
	return r
}

func (r *confRegistry) log(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(r.logPath)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// terminate sends SIGTERM and requires a clean exit.
func (r *confRegistry) terminate(t *testing.T) {
	t.Helper()
	if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-r.done:
	case <-time.After(waitFor):
		t.Fatalf("flyd registry serve still runs %s after SIGTERM", waitFor)
	}
	if code := r.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("flyd registry serve exited %d after SIGTERM:\n%s", code, r.log(t))
	}
}

// confRequest is an HTTP request to the registry with the given key ("" =
// none); it returns the status and the decoded JSON body.
func confRequest(t *testing.T, method, url, key, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("X-API-Key", key)
	}
	hc := &http.Client{Timeout: waitFor}
	defer hc.CloseIdleConnections()
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("%s %s: HTTP %d with a body that is not JSON: %v", method, url, resp.StatusCode, err)
	}
	return resp.StatusCode, out
}

// confFind returns the listed instance with id.
func confFind(t *testing.T, c *registryclient.Client, id string) (registryclient.Instance, bool) {
	t.Helper()
	ins, err := c.Instances(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range ins {
		if in.ID == id {
			return in, true
		}
	}
	return registryclient.Instance{}, false
}

// TestRegistryConformance runs the real `flyd registry serve` and checks the
// Service Registry Contract rule by rule through registryclient, then across
// a SIGTERM and a restart on the same snapshot. No root needed.
func TestRegistryConformance(t *testing.T) {
	t.Parallel()
	bin := confBinary(t)
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "keys", "registry.key") // absent: serve creates it
	args := []string{"--key-file", keyFile, "--snapshot", filepath.Join(dir, "registry.json"), "--reap-interval", "100ms"}
	r := startConfRegistry(t, bin, dir, args...)

	b, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	key := strings.TrimSpace(string(b))
	if raw, err := hex.DecodeString(key); err != nil || len(raw) != 32 {
		t.Fatalf("the created key is not 32 hex-encoded random bytes")
	}
	if fi, _ := os.Stat(keyFile); fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %04o", fi.Mode().Perm())
	}
	if !strings.Contains(r.log(t), "created a new registry key file") {
		t.Fatalf("the log does not say the key file was created:\n%s", r.log(t))
	}
	c, err := registryclient.New(r.url, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	register := func(t *testing.T, in registryclient.Instance) string {
		t.Helper()
		id, _, err := c.Register(ctx, in)
		if err != nil {
			t.Fatalf("register %s: %v", in.Name, err)
		}
		return id
	}

	t.Run("R1 wire shape", func(t *testing.T) {
		register(t, registryclient.Instance{Name: "r1", Address: "10.1.0.1", Port: 80, Healthy: true})
		code, body := confRequest(t, http.MethodGet, r.url+"/api/v1/services?detail=1", key, "")
		if code != http.StatusOK {
			t.Fatalf("HTTP %d %v", code, body)
		}
		var got map[string]any
		for _, in := range body["instances"].([]any) {
			if m := in.(map[string]any); m["id"] == "r1-10.1.0.1-80" {
				got = m
			}
		}
		for k, want := range map[string]any{"name": "r1", "address": "10.1.0.1", "port": 80.0, "protocol": "tcp",
			"weight": 100.0, "priority": 10.0, "healthy": true, "ttl_ns": float64(90 * time.Second)} {
			if got[k] != want {
				t.Errorf("%s = %v; want %v", k, got[k], want)
			}
		}
		for _, k := range []string{"registered_at", "updated_at"} {
			if s, _ := got[k].(string); s == "" {
				t.Errorf("%s missing", k)
			} else if _, err := time.Parse(time.RFC3339, s); err != nil {
				t.Errorf("%s: %v", k, err)
			}
		}
	})

	t.Run("R2 idempotent upsert", func(t *testing.T) {
		in := registryclient.Instance{Name: "r2", Address: "10.2.0.1", Port: 8080, Tags: []string{"v1"}}
		for i, wantCreated := range []bool{true, false, false} {
			id, created, err := c.Register(ctx, in)
			if err != nil || id != "r2-10.2.0.1-8080" || created != wantCreated {
				t.Fatalf("registration %d: %q created %v, %v", i+1, id, created, err)
			}
		}
		for _, bad := range []struct {
			in    registryclient.Instance
			field string
		}{
			{registryclient.Instance{Address: "h", Port: 1}, "name"},
			{registryclient.Instance{Name: "r2", Port: 1}, "address"},
			{registryclient.Instance{Name: "r2", Address: "h"}, "port"},
		} {
			_, _, err := c.Register(ctx, bad.in)
			if !errors.Is(err, registryclient.ErrBadRequest) || !strings.Contains(err.Error(), bad.field) {
				t.Errorf("without %s: %v; want ErrBadRequest naming it", bad.field, err)
			}
		}
	})

	t.Run("R3 lease heartbeat expiry", func(t *testing.T) {
		id := register(t, registryclient.Instance{Name: "r3", Address: "h", Port: 3, TTL: int64(400 * time.Millisecond)})
		if err := c.Heartbeat(ctx, id); err != nil {
			t.Fatalf("heartbeat: %v", err)
		}
		// Listing does not renew the lease; heart-beating while waiting would.
		eventually(t, "the lease to expire", func() error {
			if _, ok := confFind(t, c, id); ok {
				return errors.New("still listed")
			}
			return nil
		})
		if err := c.Heartbeat(ctx, id); !errors.Is(err, registryclient.ErrGone) {
			t.Fatalf("heartbeat of an expired instance: %v; want ErrGone", err)
		}
		if err := c.Heartbeat(ctx, "never-registered"); !errors.Is(err, registryclient.ErrGone) {
			t.Fatalf("heartbeat of an unknown id: %v; want ErrGone", err)
		}
	})

	t.Run("R4 deregister", func(t *testing.T) {
		id := register(t, registryclient.Instance{Name: "r4", Address: "h", Port: 4})
		if err := c.Deregister(ctx, id); err != nil {
			t.Fatal(err)
		}
		if _, ok := confFind(t, c, id); ok {
			t.Fatal("listed after deregistration")
		}
		if err := c.Deregister(ctx, id); !errors.Is(err, registryclient.ErrNotFound) {
			t.Fatalf("again: %v; want ErrNotFound", err)
		}
	})

	t.Run("R5 edge opt-in", func(t *testing.T) {
		register(t, registryclient.Instance{Name: "r5", Address: "h", Port: 51, Metadata: map[string]string{"jet.domain": "meta.r5.dev"}})
		register(t, registryclient.Instance{Name: "r5", Address: "h", Port: 52, Tags: []string{"jet.domain=tag.r5.dev"}})
		in, _ := confFind(t, c, "r5-h-52")
		if !slices.Contains(in.Tags, "jet.domain=tag.r5.dev") {
			t.Fatalf("tag not preserved: %v", in.Tags)
		}
		export, err := c.Export(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range []string{`domain = "meta.r5.dev"`, `domain = "tag.r5.dev"`} {
			if !strings.Contains(export, d) {
				t.Errorf("export lacks %s", d)
			}
		}
	})

	t.Run("R6 health", func(t *testing.T) {
		register(t, registryclient.Instance{Name: "r6", Address: "h", Port: 61, Healthy: true})
		register(t, registryclient.Instance{Name: "r6", Address: "h", Port: 62, Healthy: false})
		if in, _ := confFind(t, c, "r6-h-62"); in.Healthy {
			t.Fatal("unhealthy listed as healthy")
		}
		healthy, err := c.Instances(ctx, true)
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range healthy {
			if !in.Healthy || in.ID == "r6-h-62" {
				t.Fatalf("healthy_only listed %+v", in)
			}
		}
	})

	t.Run("R7 authentication", func(t *testing.T) {
		for _, rt := range []struct{ method, path string }{
			{"POST", "/api/v1/services/register"}, {"POST", "/api/v1/services/heartbeat"},
			{"POST", "/api/v1/services/deregister"}, {"GET", "/api/v1/services"},
			{"GET", "/api/v1/services?detail=1"}, {"GET", "/api/v1/services/export"},
		} {
			for _, k := range []string{"", "wrong-" + key[:8]} {
				code, body := confRequest(t, rt.method, r.url+rt.path, k, `{"id":"r1-10.1.0.1-80"}`)
				if code != http.StatusUnauthorized || body["error"] == nil {
					t.Errorf("%s %s with key %q: HTTP %d %v; want a JSON 401", rt.method, rt.path, k, code, body)
				}
			}
		}
	})

	t.Run("R8 export", func(t *testing.T) {
		export, err := c.Export(ctx)
		if err != nil {
			t.Fatal(err)
		}
		i51, i52 := strings.Index(export, "port = 51\n"), strings.Index(export, "port = 52\n")
		if !strings.HasPrefix(export, "# koder-service-ports.toml") || i51 < 0 || i52 < i51 {
			t.Fatalf("export not as specified:\n%s", export)
		}
	})

	t.Run("restart keeps leases", func(t *testing.T) {
		keep := register(t, registryclient.Instance{Name: "keep", Address: "h", Port: 9, Healthy: true})
		brief := register(t, registryclient.Instance{Name: "brief", Address: "h", Port: 9, TTL: int64(time.Second)})
		before, _ := confFind(t, c, keep)
		expires := time.Now().Add(time.Second)
		r.terminate(t)
		time.Sleep(time.Until(expires) + 100*time.Millisecond) // brief expires while the registry is down

		r2 := startConfRegistry(t, bin, dir, args...)
		c2, err := registryclient.New(r2.url, keyFile)
		if err != nil {
			t.Fatal(err)
		}
		defer c2.Close()
		after, ok := confFind(t, c2, keep)
		if !ok || !after.RegisteredAt.Equal(before.RegisteredAt) || !after.UpdatedAt.Equal(before.UpdatedAt) {
			t.Fatalf("lease not kept: before %+v\nafter %+v (found %v)", before, after, ok)
		}
		if _, ok := confFind(t, c2, brief); ok {
			t.Fatal("an instance that expired while the registry was down is listed")
		}
		if err := c2.Heartbeat(ctx, keep); err != nil {
			t.Fatalf("heartbeat after the restart: %v", err)
		}
		if strings.Contains(r2.log(t), "created a new registry key file") {
			t.Fatal("the restart replaced the key file")
		}

		cctx, cancel := context.WithTimeout(ctx, waitFor)
		defer cancel()
		ls := []string{"registry", "ls", "--registry", r2.url, "--registry-key-file", keyFile}
		out, errOut, code := runCmd(t, exec.CommandContext(cctx, bin, ls...))
		if code != 0 || !strings.HasPrefix(out, "NAME") || !strings.Contains(out, keep) || strings.Contains(out, brief) {
			t.Fatalf("flyd registry ls: exit %d\n%s%s", code, out, errOut)
		}
		out, errOut, code = runCmd(t, exec.CommandContext(cctx, bin, append(ls, "--json", "--healthy-only")...))
		var listed []registryclient.Instance
		if code != 0 || json.Unmarshal([]byte(out), &listed) != nil || !slices.ContainsFunc(listed, func(in registryclient.Instance) bool { return in.ID == keep }) {
			t.Fatalf("flyd registry ls --json: exit %d\n%s%s", code, out, errOut)
		}
		for _, log := range []string{r.log(t), r2.log(t), out, errOut} {
			if strings.Contains(log, key) {
				t.Fatal("the key appears in a log or an output")
			}
		}
	})
}
