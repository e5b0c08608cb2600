package main

// With -shop DIR (integration/testdata/shop), the bench measures the shop's
// compose files instead of the five-service stack: `flyd up --wait -f
// compose.yaml -f compose.override.yaml` and `flyd down --volumes`, its
// services native through x-flyd and its one container pulled from a
// registry the bench serves on loopback into a containerd of its own; with
// -compose, the same files under docker compose, timed as the stack's are.
//
// docker compose runs them with two changes, in files of their own beside
// them: docker-compose 1.29 knows neither the top-level name: nor
// depends_on's restart:, so its copy has neither (compose.v1.yaml); and
// this machine pulls no image from the internet, so an override file
// (compose.docker.yaml) gives the services the bench's Debian image with
// the commands the official images would run (PostgreSQL's initdb on an
// empty volume, Redis and nginx on every address), and the addresses by
// service name. The static container's image is pulled by both from the
// same loopback registry, once, in the warm-up.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/flyd-dev/flyd/driver/containerd/ctrtest"
)

// shop is the shop's copy, its containerd and its registry.
type shop struct {
	src, dir, data string
	ctrd           *ctrtest.Daemon
	reg            *ctrtest.Registry
}

// dockerShop is compose.docker.yaml: what docker compose runs the shop's
// services with on a machine that pulls no image from the internet.
const dockerShop = `services:
  db:
    image: ` + composeImage + `
    user: root
    command: [sh, -c, 'd=/var/lib/postgresql/data; chown postgres "$$d" && { [ -s "$$d/PG_VERSION" ] || { setpriv --reuid=postgres --regid=postgres --init-groups /usr/lib/postgresql/15/bin/initdb -D "$$d" -U postgres --auth=trust -E UTF8 >/dev/null && echo "host all all all trust" >> "$$d/pg_hba.conf"; }; } && exec setpriv --reuid=postgres --regid=postgres --init-groups /usr/lib/postgresql/15/bin/postgres -D "$$d" -p 5432 -c listen_addresses=* -c unix_socket_directories=']
  redis:
    image: ` + composeImage + `
    command: [redis-server, --port, "6379", --bind, 0.0.0.0, --protected-mode, "no", --save, "", --appendonly, "no", --dir, /tmp]
  migrate:
    image: ` + composeImage + `
    environment: {PGHOST: db}
  web:
    image: ` + composeImage + `
    environment: {PGHOST: db, REDIS_HOST: redis, LISTEN_HOST: 0.0.0.0}
    init: true  # python as pid 1 ignores SIGTERM: down would wait 10s to kill it
  worker:
    image: ` + composeImage + `
    environment: {PGHOST: db, REDIS_HOST: redis}
    init: true
  proxy:
    image: ` + composeImage + `
    command: [nginx, -g, "daemon off;"]
    volumes: [./nginx.docker.conf:/etc/nginx/nginx.conf:ro]
  debug:
    image: ` + composeImage + `
`

// startShop copies the shop into the bench's directory and starts its
// containerd and registry; the daemon is then started with the
// containerd.
func (b *bench) startShop(src string, progs programs) error {
	s := &shop{src: src, dir: filepath.Join(b.dir, "shop"), data: filepath.Join(b.dir, "shop-data")}
	b.shop = s
	if err := os.CopyFS(s.dir, os.DirFS(src)); err != nil {
		return fmt.Errorf("-shop: %w", err)
	}
	if err := os.MkdirAll(s.data, 0o755); err != nil {
		return err
	}
	// Each copy's postgres (as the postgres user) makes its cluster here.
	if err := os.Chmod(s.data, 0o1777); err != nil {
		return err
	}
	var err error
	if s.ctrd, err = ctrtest.StartDaemon(filepath.Join(b.dir, "containerd")); err != nil {
		return err
	}
	archive := filepath.Join(b.dir, "bbox.tar")
	if err := ctrtest.BusyboxArchive(archive, "docker.io/library/bbox:latest"); err != nil {
		return err
	}
	if s.reg, err = ctrtest.ServeRegistry(archive, []string{"shop/static"}); err != nil {
		return err
	}
	tmpl, err := os.ReadFile(filepath.Join(s.dir, "nginx.conf.in"))
	if err != nil {
		return err
	}
	base, err := os.ReadFile(filepath.Join(s.dir, "compose.yaml"))
	if err != nil {
		return err
	}
	v1 := string(base)
	for _, cut := range []string{"name: shop\n", ", restart: true"} {
		if !strings.Contains(v1, cut) {
			return fmt.Errorf("-shop: compose.yaml has no %q to leave out for docker-compose 1.29", cut)
		}
		v1 = strings.Replace(v1, cut, "", 1)
	}
	files := map[string]string{
		".env": fmt.Sprintf("REGISTRY=%s\nDB_HOST=127.0.0.1\nDB_PASSWORD=not-used\nREDIS_HOST=127.0.0.1\nGREETING=from-dotenv\nPGBIN=%s\nDATA=%s\n",
			s.reg.Addr, progs.pgBin, s.data),
		"nginx.conf":          strings.NewReplacer("@DATA@", s.data, "@LISTEN@", "127.0.0.1:8080", "@WEB@", "127.0.0.1:8000", "@STATIC@", "127.0.0.1:8081").Replace(string(tmpl)),
		"nginx.docker.conf":   strings.NewReplacer("@DATA@", "/tmp", "@LISTEN@", "8080", "@WEB@", "web:8000", "@STATIC@", "static:8081").Replace(string(tmpl)),
		"compose.v1.yaml":     v1,
		"compose.docker.yaml": dockerShop,
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(s.dir, name), []byte(text), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// flydFiles are the -f arguments of flyd's up.
func (s *shop) flydFiles() []string {
	return []string{"-f", filepath.Join(s.dir, "compose.yaml"), "-f", filepath.Join(s.dir, "compose.override.yaml")}
}

// composeFiles are docker-compose's.
func (s *shop) composeFiles() []string {
	return []string{"-f", filepath.Join(s.dir, "compose.v1.yaml"), "-f", filepath.Join(s.dir, "compose.override.yaml"), "-f", filepath.Join(s.dir, "compose.docker.yaml")}
}

// shopUpAll is upAll of the shop.
func (b *bench) shopUpAll(ctx context.Context, projects []string) ([]time.Duration, time.Duration, error) {
	for _, p := range projects {
		b.used.Store(p, true)
	}
	return b.timedAll(ctx, projects, func(p string) []string {
		return append(append([]string{"up", "-p", p}, b.shop.flydFiles()...), "--wait", "--timeout", b.timeout.String())
	})
}

// shopDownAll is downAll of the shop, its named volumes too; each copy's
// cluster is then removed, untimed, so that the next up makes it again,
// as docker compose's does in a volume that down --volumes removed.
func (b *bench) shopDownAll(ctx context.Context, projects []string) ([]time.Duration, time.Duration, error) {
	times, cpu, err := b.timedAll(ctx, projects, func(p string) []string { return []string{"down", "-p", p, "--volumes"} })
	if err != nil {
		return nil, 0, err
	}
	var errs []error
	for _, p := range projects {
		if err := b.gone(ctx, p); err != nil {
			errs = append(errs, err)
		}
		if err := os.RemoveAll(filepath.Join(b.shop.data, "pg-"+p+".default")); err != nil {
			errs = append(errs, err)
		}
	}
	return times, cpu, errors.Join(errs...)
}

// shopAnswers checks, untimed, that each copy's nginx answers on its own
// published port with the web app's page, which reads its copy's
// PostgreSQL and Redis.
func (b *bench) shopAnswers(ctx context.Context, projects []string) error {
	for _, p := range projects {
		port, err := b.published(ctx, p, p+".proxy")
		if err != nil {
			return err
		}
		body, err := get(ctx, fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil || !strings.HasPrefix(body, "from-override jobs=0 hits=1") {
			return fmt.Errorf("%s at 127.0.0.1:%d: %q, %v; want the web app's page", p, port, body, err)
		}
	}
	return nil
}

// close stops the registry and the containerd, once the daemon has
// removed the containers.
func (s *shop) close() {
	if s.reg != nil {
		_ = s.reg.Close()
	}
	if s.ctrd != nil {
		s.ctrd.Stop()
	}
}

// shopComposeUp brings the shop up under docker compose, each copy timed
// until its nginx answers with the web app's page.
func (c *composer) shopUpAll(ctx context.Context, s *shop, projects []string, timeout time.Duration) ([]time.Duration, error) {
	return c.timedAll(ctx, projects, func(p string) error {
		c.used.Store(p, s.composeFiles())
		if _, err := c.runIn(ctx, p, timeout, c.compose, append(s.composeFiles(), "up", "-d")...); err != nil {
			return err
		}
		out, err := c.runIn(ctx, p, time.Minute, c.compose, append(s.composeFiles(), "port", "proxy", "8080")...)
		if err != nil {
			return err
		}
		addr := strings.TrimSpace(string(out))
		deadline := time.Now().Add(timeout)
		for {
			body, err := get(ctx, addr)
			if err == nil && strings.HasPrefix(body, "from-override jobs=0 hits=") {
				return nil
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s at %s: %q, %v", p, addr, body, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}

// shopDownAll takes the shop's copies down under docker compose.
func (c *composer) shopDownAll(ctx context.Context, s *shop, projects []string) ([]time.Duration, error) {
	return c.downWith(ctx, projects, s.composeFiles())
}
