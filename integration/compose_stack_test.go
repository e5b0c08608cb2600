package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flyd-dev/flyd/api"
	"github.com/flyd-dev/flyd/driver/containerd/ctrtest"
)

// shopDir writes the shop's files into a directory of the daemon's, for
// the programs of this host.
func shopDir(t *testing.T, d *daemon, registry string) string {
	t.Helper()
	pgBin, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres")
	if len(pgBin) == 0 {
		postgres(t, d.dir) // skips, saying why (under CI, fails)
	}
	need(t, "redis-server", "redis-server")
	need(t, "redis-cli", "redis-tools")
	need(t, "nginx", "nginx-light")
	need(t, "psql", "postgresql-client")
	need(t, "curl", "curl")
	return writeShop(t, d.dir, registry, filepath.Dir(pgBin[0]))
}

// writeShop copies the shop (testdata/shop) into base/shop and writes
// its .env, which says where the registry, PostgreSQL's programs and the
// data (base/data) are, and its nginx.conf.
func writeShop(t *testing.T, base, registry, pgBin string) string {
	t.Helper()
	dir := filepath.Join(base, "shop")
	data := filepath.Join(base, "data")
	if err := os.CopyFS(dir, os.DirFS("testdata/shop")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(data, 0o755); err != nil {
		t.Fatal(err)
	}
	// Each copy's postgres makes its cluster here, as the postgres user.
	if err := os.Chmod(data, 0o1777); err != nil {
		t.Fatal(err)
	}
	tmpl, err := os.ReadFile(filepath.Join(dir, "nginx.conf.in"))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		".env": fmt.Sprintf("REGISTRY=%s\nDB_HOST=127.0.0.1\nDB_PASSWORD=not-used\nREDIS_HOST=127.0.0.1\nGREETING=from-dotenv\nPGBIN=%s\nDATA=%s\n",
			registry, pgBin, data),
		"nginx.conf": strings.NewReplacer("@DATA@", data, "@LISTEN@", "127.0.0.1:8080", "@WEB@", "127.0.0.1:8000", "@STATIC@", "127.0.0.1:8081").Replace(string(tmpl)),
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestComposeShop: a web shop's compose file, with its override file and
// .env, comes up twice as two projects with up --wait, its services
// native through x-flyd and one container whose image is pulled from a
// registry; each copy answers the real clients (psql, redis-cli, curl
// through nginx) with its own data; down --volumes leaves nothing.
func TestComposeShop(t *testing.T) {
	t.Parallel()
	ctrd, _, archive := privateContainerd(t)
	reg, err := ctrtest.ServeRegistry(archive, []string{"shop/static"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Close() })
	d := startDaemon(t, withArgs("--containerd-socket", ctrd.Socket))
	dir := shopDir(t, d, reg.Addr)
	compose, override := filepath.Join(dir, "compose.yaml"), filepath.Join(dir, "compose.override.yaml")

	events := startStream(t, d.socket, "events")
	started := time.Now()
	for _, p := range []struct{ name, profile string }{{"shop-a", ""}, {"shop-b", "debug"}} {
		args := []string{"up", "--wait", "-p", p.name, "-f", compose, "-f", override}
		if p.profile != "" {
			args = append(args, "--profile", p.profile)
		}
		out, errOut, code := runCLI(t, d.socket, args...)
		if code != 0 {
			t.Fatalf("flyd %s: exit %d\n%s%s\n%s", strings.Join(args, " "), code, out, errOut, d.log())
		}
		if left := strings.Contains(out, "debug left out: profiles debug"); left != (p.profile == "") {
			t.Errorf("up -p %s (profile %q) on debug:\n%s", p.name, p.profile, out)
		}
		for _, want := range []string{"service db: volumes: a native workload runs on the host's files"} {
			if !strings.Contains(errOut, want) {
				t.Errorf("up -p %s warns of no %q:\n%s", p.name, want, errOut)
			}
		}
	}
	t.Logf("two copies up in %s", time.Since(started).Round(time.Millisecond))
	if asked := reg.Asked(); len(asked) == 0 {
		t.Error("the registry was asked nothing: the static image was not pulled")
	}
	// The pull is shown while the workload prepares: its layers and bytes.
	events.waitLine(t, "shop-a.static preparing, its pull's progress told", func(l string) bool {
		return strings.Contains(l, "shop-a.static") && strings.Contains(l, "preparing") && strings.Contains(l, "/shop/static:latest: 1/1 layers, ")
	})

	for i, p := range []string{"shop-a", "shop-b"} {
		for _, name := range []string{"db", "redis", "web", "worker-1", "worker-2", "static", "proxy"} {
			if w := d.get(t, p+"."+name); w.State != api.StateRunning {
				t.Errorf("%s.%s is %s after up --wait", p, name, w.State)
			}
		}
		if mig := d.get(t, p+".migrate"); mig.State != api.StateExited || mig.LastExit == nil || mig.LastExit.Code != 0 {
			t.Errorf("%s.migrate: %s %+v", p, mig.State, mig.LastExit)
		}
		if w := d.get(t, p+".static"); w.Spec.Kind != "containerd" || w.ContainerID == "" {
			t.Errorf("%s.static: kind %s, container %q", p, w.Spec.Kind, w.ContainerID)
		}
		if _, err := d.client.Get(context.Background(), p+".debug"); (err == nil) != (p == "shop-b") {
			t.Errorf("%s.debug: %v", p, err)
		}

		// Jobs through redis-cli, taken by the workers into PostgreSQL.
		jobs := 3 + 2*i
		rport := strconv.Itoa(published(t, d, p+".redis"))
		for j := range jobs {
			if out, err := exec.Command("redis-cli", "-p", rport, "lpush", "jobs", fmt.Sprintf("%s-job-%d", p, j)).CombinedOutput(); err != nil || !isNumber(strings.TrimSpace(string(out))) {
				t.Fatalf("redis-cli lpush: %v: %s", err, out)
			}
		}
		pport := strconv.Itoa(published(t, d, p+".db"))
		eventually(t, p+"'s workers taking the jobs", func() error {
			out, err := exec.Command("psql", "-h", "127.0.0.1", "-p", pport, "-U", "postgres", "-Atc",
				"select count(*), bool_and(job like '"+p+"-%') from jobs_done").CombinedOutput()
			if got := strings.TrimSpace(string(out)); err != nil || got != fmt.Sprintf("%d|t", jobs) {
				return fmt.Errorf("psql: %q %v; worker-1's log:\n%s", got, err, d.logs(t, p+".worker-1"))
			}
			return nil
		})

		// Through nginx: the web app, and the container's page.
		proxy := fmt.Sprintf("http://127.0.0.1:%d/", published(t, d, p+".proxy"))
		if out, err := exec.Command("curl", "-fsS", proxy).CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != fmt.Sprintf("from-override jobs=%d hits=1", jobs) {
			t.Errorf("curl %s: %q %v", proxy, out, err)
		}
		if out, err := exec.Command("curl", "-fsS", proxy+"static/").CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "static of from-dotenv" {
			t.Errorf("curl %sstatic/: %q %v", proxy, out, err)
		}
	}

	for _, p := range []string{"shop-a", "shop-b"} {
		out := d.mustCLI(t, "down", "--volumes", "-p", p)
		if !strings.Contains(out, "volume "+p+".assets removed") {
			t.Errorf("down --volumes -p %s:\n%s", p, out)
		}
	}
	assertNoProjects(t, d, "shop-a", "shop-b")
	out, err := exec.Command("ctr", "--address", ctrd.Socket, "-n", "flyd", "containers", "ls", "-q").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "" {
		t.Errorf("containers left after down: %q %v", out, err)
	}
	if es, _ := os.ReadDir(filepath.Join(d.stateDir, "volumes")); len(es) != 0 {
		t.Errorf("volumes left after down --volumes: %v", es)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "..", "data", "nginx-*.pid")); len(m) != 0 {
		t.Errorf("nginx left its pid files: %v", m)
	}
}

func isNumber(s string) bool {
	_, err := strconv.Atoi(s)
	return err == nil
}
