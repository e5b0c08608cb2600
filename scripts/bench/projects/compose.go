package main

// The same stack under docker compose, side by side in the same run: with
// -compose, a Debian root made by mmdebstrap with the stack's packages
// (about a minute; -compose-root reuses one), imported as one image, and a
// private Docker engine (its own
// data and exec roots and socket, no iptables rules: its published ports
// go through docker-proxy on loopback, and the host's firewall is left as
// it is). Each copy is `docker-compose -p P up -d` timed until its
// published port answers with the copy's own data, and `docker-compose -p
// P down --volumes` until it returns; both are then checked to have left
// nothing (containers, networks, volumes) of the project.
//
//	apt-get install docker.io docker-compose mmdebstrap
//	/tmp/projbench -flyd bin/flyd -compose

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// composeImage is the image the stack's services run, imported from the
// root tarball.
const composeImage = "flyd-bench-stack:1"

// composeYAML is the stack of stackYAML for compose: the same programs,
// checks at the same interval, the same order (initdb, then pg; seed once
// pg is healthy; the app once seed completed; nginx once the app is
// healthy), nginx published on a port the engine picks.
const composeYAML = `services:
  initdb:
    image: ` + composeImage + `
    command: [sh, -c, 'chown postgres /data && runuser -u postgres -- /usr/lib/postgresql/15/bin/initdb -D /data/pg -U postgres --auth=trust -E UTF8 && echo "host all all all trust" >> /data/pg/pg_hba.conf']
    volumes: [pgdata:/data]
  pg:
    image: ` + composeImage + `
    user: postgres
    command: [/usr/lib/postgresql/15/bin/postgres, -D, /data/pg, -p, "5432", -c, "listen_addresses=*", -c, unix_socket_directories=]
    volumes: [pgdata:/data]
    depends_on: {initdb: {condition: service_completed_successfully}}
    healthcheck: {test: [CMD, pg_isready, -h, 127.0.0.1, -p, "5432"], interval: 200ms, retries: 300}
    stop_signal: SIGINT
  seed:
    image: ` + composeImage + `
    environment: {COPY: "${COMPOSE_PROJECT_NAME}"}
    command: [sh, -c, 'exec psql -h pg -p 5432 -U postgres -v ON_ERROR_STOP=1 -c "create table copy (name text)" -c "insert into copy values (''$$COPY'')"']
    depends_on: {pg: {condition: service_healthy}}
  redis:
    image: ` + composeImage + `
    command: [redis-server, --port, "6379", --bind, 0.0.0.0, --protected-mode, "no", --save, "", --appendonly, "no", --dir, /tmp]
    healthcheck: {test: [CMD, redis-cli, ping], interval: 200ms, retries: 300}
  app:
    image: ` + composeImage + `
    environment:
      CODEFLY__ENDPOINT__STORE__PG__TCP__TCP: pg:5432
      CODEFLY__ENDPOINT__STORE__REDIS__TCP__TCP: redis:6379
      FLYD_PORT_HTTP: "8000"
    command: [sh, -c, 'sed "s/\"127.0.0.1\", int/\"0.0.0.0\", int/" /stack/app.py > /tmp/app.py && exec python3 /tmp/app.py']
    volumes: ["${STACK}:/stack:ro"]
    init: true  # python as pid 1 would ignore SIGTERM: down would wait 10s to kill it
    depends_on:
      seed: {condition: service_completed_successfully}
      redis: {condition: service_healthy}
    healthcheck: {test: [CMD, python3, -c, "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/health')"], interval: 200ms, retries: 300}
  web:
    image: ` + composeImage + `
    command: [sh, -c, 'mkdir -p /tmp/web && sed -e "s|@DIR@|/tmp/web|g" -e "s|@PORT@|80|" -e "s|@APP@|http://app:8000|" -e "s|127.0.0.1:80|80|" /stack/nginx.conf.in > /tmp/web/nginx.conf && exec nginx -e stderr -c /tmp/web/nginx.conf -g "daemon off;"']
    volumes: ["${STACK}:/stack:ro"]
    ports: ["127.0.0.1::80"]
    depends_on: {app: {condition: service_healthy}}
    stop_signal: SIGQUIT
volumes:
  pgdata: {}
`

// rootPackages are the stack's programs, from Debian, in the image.
var rootPackages = "postgresql,postgresql-client,redis-server,redis-tools,nginx-light,python3,curl"

// buildRoot makes the image's root with mmdebstrap, from this machine's
// apt sources.
func buildRoot(ctx context.Context, dir string) (string, error) {
	mm, err := exec.LookPath("mmdebstrap")
	if err != nil {
		return "", fmt.Errorf("-compose: mmdebstrap is not installed (apt-get install mmdebstrap), or give -compose-root: %w", err)
	}
	out := filepath.Join(dir, "stack-root.tar")
	logf("making the image's Debian root (%s) with mmdebstrap", rootPackages)
	cmd := exec.CommandContext(ctx, mm, "--quiet", "--variant=apt", "--include="+rootPackages, "bookworm", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("mmdebstrap: %v\n%s", err, b)
	}
	return out, nil
}

// composer drives the private engine and docker-compose.
type composer struct {
	compose, docker string // the programs
	dir, sock       string
	stack           string // the stack's files (app.py, nginx.conf.in)
	engine          *exec.Cmd
	engineDone      chan struct{}
	engineLog       string
	used            sync.Map // projects that may have something to take down
}

// startCompose starts the private engine and imports the image.
func (b *bench) startCompose(ctx context.Context, root string) error {
	c := &composer{dir: filepath.Join(b.dir, "docker"), stack: b.stack}
	var err error
	if root == "" {
		if root, err = buildRoot(ctx, b.dir); err != nil {
			return err
		}
	}
	if c.compose, err = exec.LookPath("docker-compose"); err != nil {
		return fmt.Errorf("-compose-root: docker-compose is not installed (apt-get install docker-compose): %w", err)
	}
	dockerd, err := exec.LookPath("dockerd")
	if err != nil {
		return fmt.Errorf("-compose-root: dockerd is not installed (apt-get install docker.io): %w", err)
	}
	// Debian's client, of the engine's version, before any other.
	c.docker = "/usr/bin/docker"
	if _, err := os.Stat(c.docker); err != nil {
		c.docker = "docker"
	}
	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		return err
	}
	b.compose = c
	c.sock = filepath.Join(c.dir, "docker.sock")
	c.engineLog = filepath.Join(c.dir, "dockerd.log")
	logFile, err := os.Create(c.engineLog)
	if err != nil {
		return err
	}
	defer logFile.Close()
	c.engine = exec.Command(dockerd, "--data-root", filepath.Join(c.dir, "data"), "--exec-root", filepath.Join(c.dir, "exec"),
		"--host", "unix://"+c.sock, "--pidfile", filepath.Join(c.dir, "dockerd.pid"),
		"--iptables=false", "--ip6tables=false", "--bridge=none")
	c.engine.Stdout, c.engine.Stderr = logFile, logFile
	c.engine.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := c.engine.Start(); err != nil {
		return err
	}
	c.engineDone = make(chan struct{})
	go func() { _ = c.engine.Wait(); close(c.engineDone) }()
	deadline := time.Now().Add(time.Minute)
	for {
		if _, err := c.run(ctx, 10*time.Second, c.docker, "version"); err == nil {
			break
		}
		select {
		case <-c.engineDone:
			return fmt.Errorf("dockerd exited; its log:\n%s", b.tail(c.engineLog, 20))
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("dockerd did not answer within a minute; its log:\n%s", b.tail(c.engineLog, 20))
		}
		time.Sleep(100 * time.Millisecond)
	}
	logf("importing %s as %s", root, composeImage)
	_, err = c.run(ctx, 10*time.Minute, c.docker, "import", root, composeImage)
	return err
}

// env is the environment of docker and docker-compose: the private engine.
func (c *composer) env(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "DOCKER_") || strings.HasPrefix(k, "COMPOSE_") {
			continue
		}
		env = append(env, kv)
	}
	return append(append(env, "DOCKER_HOST=unix://"+c.sock, "STACK="+c.stack), extra...)
}

// run runs a docker or docker-compose command and returns its stdout.
func (c *composer) run(ctx context.Context, limit time.Duration, name string, args ...string) ([]byte, error) {
	return c.runIn(ctx, "", limit, name, args...)
}

// runIn is run for project p (COMPOSE_PROJECT_NAME, which the file reads
// too), none for "".
func (c *composer) runIn(ctx context.Context, p string, limit time.Duration, name string, args ...string) ([]byte, error) {
	cctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	cmd := exec.CommandContext(cctx, name, args...)
	cmd.Dir, cmd.Env = c.dir, c.env()
	if p != "" {
		cmd.Env = c.env("COMPOSE_PROJECT_NAME=" + p)
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return out.Bytes(), fmt.Errorf("%s %s: %v\n%s%s", filepath.Base(name), strings.Join(args, " "), err, out.String(), errOut.String())
	}
	return out.Bytes(), nil
}

// upAll brings the projects up at once, each timed until its published
// port answers with its copy's data.
func (c *composer) upAll(ctx context.Context, projects []string, timeout time.Duration) ([]time.Duration, error) {
	file := filepath.Join(c.dir, "compose.yaml")
	if err := os.WriteFile(file, []byte(composeYAML), 0o644); err != nil {
		return nil, err
	}
	return c.timedAll(ctx, projects, func(p string) error {
		c.used.Store(p, []string{"-f", file})
		if _, err := c.runIn(ctx, p, timeout, c.compose, "-f", file, "up", "-d"); err != nil {
			return err
		}
		out, err := c.runIn(ctx, p, time.Minute, c.compose, "-f", file, "port", "web", "80")
		if err != nil {
			return err
		}
		addr := strings.TrimSpace(string(out))
		deadline := time.Now().Add(timeout)
		for {
			body, err := get(ctx, addr)
			if err == nil && strings.HasPrefix(body, "copy="+p+" ") {
				return nil
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s at %s: %q, %v", p, addr, body, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}

// downAll takes the projects down at once, timed, then checks each left
// nothing.
func (c *composer) downAll(ctx context.Context, projects []string) ([]time.Duration, error) {
	return c.downWith(ctx, projects, []string{"-f", filepath.Join(c.dir, "compose.yaml")})
}

// downWith is downAll of the projects of files (-f arguments).
func (c *composer) downWith(ctx context.Context, projects []string, files []string) ([]time.Duration, error) {
	times, err := c.timedAll(ctx, projects, func(p string) error {
		_, err := c.runIn(ctx, p, 5*time.Minute, c.compose, append(slices.Clone(files), "down", "--volumes")...)
		return err
	})
	if err != nil {
		return nil, err
	}
	var left []error
	for _, p := range projects {
		for _, what := range [][]string{{"ps", "-a"}, {"network", "ls"}, {"volume", "ls"}} {
			out, err := c.run(ctx, time.Minute, c.docker, append(what, "-q", "--filter", "label=com.docker.compose.project="+p)...)
			if err != nil {
				return nil, err
			}
			if s := strings.TrimSpace(string(out)); s != "" {
				left = append(left, fmt.Errorf("LEFT BEHIND after docker-compose -p %s down: docker %s: %s", p, strings.Join(what, " "), s))
			}
		}
	}
	return times, errors.Join(left...)
}

// timedAll runs f for every project at once, each timed from when all
// are let go until it returns.
func (c *composer) timedAll(ctx context.Context, projects []string, f func(p string) error) ([]time.Duration, error) {
	times := make([]time.Duration, len(projects))
	errs := make([]error, len(projects))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for k, p := range projects {
		wg.Go(func() {
			<-start
			t0 := time.Now()
			errs[k] = f(p)
			times[k] = time.Since(t0)
		})
	}
	close(start)
	wg.Wait()
	return times, errors.Join(errs...)
}

// get is GET http://addr/'s body.
func get(ctx context.Context, addr string) (string, error) {
	hctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(hctx, http.MethodGet, "http://"+addr+"/", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return string(body), err
}

// cleanup takes every project down, stops the engine (which unmounts its
// layers and ends its containerd) and removes its directory.
func (c *composer) cleanup() error {
	var errs []error
	ctx := context.Background()
	c.used.Range(func(k, v any) bool {
		files, _ := v.([]string)
		if _, err := c.runIn(ctx, k.(string), 5*time.Minute, c.compose, append(slices.Clone(files), "down", "--volumes")...); err != nil {
			errs = append(errs, fmt.Errorf("cleanup: %w", err))
		}
		return true
	})
	if c.engine != nil && c.engine.Process != nil {
		_ = c.engine.Process.Signal(syscall.SIGTERM)
		select {
		case <-c.engineDone:
		case <-time.After(30 * time.Second):
			errs = append(errs, errors.New("cleanup: dockerd did not exit within 30s of SIGTERM: SIGKILL"))
			_ = syscall.Kill(-c.engine.Process.Pid, syscall.SIGKILL)
			<-c.engineDone
		}
	}
	// What the engine still had mounted under its roots (a SIGKILL).
	if data, err := os.ReadFile("/proc/self/mounts"); err == nil {
		lines := strings.Split(string(data), "\n")
		for i := len(lines) - 1; i >= 0; i-- {
			if f := strings.Fields(lines[i]); len(f) > 1 && strings.HasPrefix(f[1], c.dir+"/") {
				errs = append(errs, fmt.Errorf("LEFT BEHIND: mount %s, now unmounted", f[1]))
				_ = syscall.Unmount(f[1], syscall.MNT_DETACH)
			}
		}
	}
	if err := os.RemoveAll(c.dir); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
