// Command projects measures flyd's projects: `flyd up --wait` and `flyd
// down` of a five-service stack (Debian's PostgreSQL with an initdb
// one-shot and a seed one-shot, Redis, a Python app wired by `uses`, nginx
// published on a hashed port) at 1, 4 and 8 copies at once, each copy
// timed from its CLI's start until it returns; and what `flyd run` costs
// around `true`, against `true` run directly and against `flyd up --wait`
// plus `flyd down` of the same small project. It prints one markdown table.
//
//	go build -o /tmp/projbench ./scripts/bench/projects
//	/tmp/projbench -flyd bin/flyd [-copies 1,4,8] [-rounds 3] [-runs 10]
//
// -flyd is the CLI binary of any build of flyd; `flyd daemon` execs the
// flyd-daemon beside it. The program starts one private daemon (its own
// FLYD_HOME, socket, state, run and workloads dirs, an empty config, its
// own cgroup parent, no registry) in a temporary directory, and writes the
// stack there. After every down it checks that nothing of the project is
// left (`flyd ps`, `flyd networks`, its network namespace and cgroups) and
// fails loudly if something is. On exit, interrupted or not, every project
// is taken down, the daemon stopped, and whatever is still there of it
// (processes, cgroups, its nftables table, links, mounts) removed and
// reported, then the directory. Root only. With -shop DIR it measures the
// shop's compose files instead (shop.go).
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/flyd-dev/flyd/firewall"
	"github.com/flyd-dev/flyd/internal/instance"
)

func main() {
	flydBin := flag.String("flyd", "", "the flyd CLI binary measured (flyd-daemon beside it)")
	copies := flag.String("copies", "1,4,8", "copies of the stack brought up at once, each in turn")
	rounds := flag.Int("rounds", 3, "rounds of up and down at each number of copies")
	runs := flag.Int("runs", 10, "runs of each of `true`, up+down and `flyd run -- true`")
	timeout := flag.Duration("timeout", 3*time.Minute, "how long one copy may take to come up (up's --timeout)")
	pool := flag.String("network-pool", "10.213.0.0/16", "the daemon's --network-pool")
	base := flag.String("dir", "", "where the temporary directory goes (default /dev/shm, else the system's)")
	withCompose := flag.Bool("compose", false, "the same stack under docker compose too, side by side (compose.go)")
	composeRoot := flag.String("compose-root", "", "with -compose, the image's Debian root tarball, instead of making one with mmdebstrap")
	shopDir := flag.String("shop", "", "the shop's compose files (integration/testdata/shop), measured instead of the five-service stack (shop.go)")
	flag.Parse()
	if *flydBin == "" {
		fmt.Fprintln(os.Stderr, "-flyd is required")
		os.Exit(2)
	}
	var ns []int
	for _, f := range strings.Split(*copies, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 64 {
			fmt.Fprintf(os.Stderr, "-copies: %q is not a number from 1 to 64\n", f)
			os.Exit(2)
		}
		ns = append(ns, n)
	}
	if *rounds < 1 || *runs < 1 {
		fmt.Fprintln(os.Stderr, "-rounds and -runs are at least 1")
		os.Exit(2)
	}
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "projects bench: run as root (flyd makes cgroups, namespaces and runs workloads as postgres)")
		os.Exit(1)
	}
	// An interrupt cancels what runs and goes to the cleanup; the signals
	// stay caught until the end, so a second Ctrl-C cannot cut it short.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	b := &bench{flyd: *flydBin, timeout: *timeout, pool: *pool, withCompose: *withCompose, composeRoot: *composeRoot, shopSrc: *shopDir}
	err := b.run(ctx, *base, ns, *rounds, *runs)
	if cerr := b.cleanup(); cerr != nil {
		err = errors.Join(err, cerr)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "projects bench:", err)
		if ctx.Err() != nil {
			os.Exit(130)
		}
		os.Exit(1)
	}
}

type bench struct {
	flyd    string
	timeout time.Duration
	pool    string

	withCompose bool
	composeRoot string
	compose     *composer // the engine, once started
	shopSrc     string
	shop        *shop // the shop's copy, its containerd and registry, with -shop

	dir, sock, runDir, cgParent string
	stack, small                string
	daemon                      *exec.Cmd
	daemonDone                  chan struct{}
	daemonLog                   string
	loadStart                   string // the 1-minute load average when the run began
	shmBefore                   map[string]bool
	used                        sync.Map // project names that may have something to take down
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[projects %s] %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// programs are the stack's programs, found on this machine.
type programs struct{ pgBin, redis, nginx, python string }

func findPrograms() (programs, error) {
	var p programs
	var missing []string
	if m, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres"); len(m) > 0 {
		slices.Sort(m)
		p.pgBin = filepath.Dir(m[len(m)-1])
	} else {
		missing = append(missing, "postgresql")
	}
	look := func(name, pkg string) string {
		path, err := exec.LookPath(name)
		if err != nil {
			missing = append(missing, pkg)
		}
		return path
	}
	p.redis = look("redis-server", "redis-server")
	p.nginx = look("nginx", "nginx-light")
	look("psql", "postgresql-client")
	look("redis-cli", "redis-tools")
	// Debian's python3, not one that a user's PATH puts first.
	p.python = "/usr/bin/python3"
	if _, err := os.Stat(p.python); err != nil {
		p.python = look("python3", "python3")
	}
	if len(missing) > 0 {
		return p, fmt.Errorf("missing programs: apt-get install %s", strings.Join(missing, " "))
	}
	return p, nil
}

func (b *bench) run(ctx context.Context, base string, ns []int, rounds, runs int) error {
	var err error
	b.loadStart = loadavg()
	b.shmBefore = pgSegments()
	if b.flyd, err = filepath.Abs(b.flyd); err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(b.flyd), "flyd-daemon")); err != nil {
		return fmt.Errorf("flyd-daemon is not beside %s: %w", b.flyd, err)
	}
	progs, err := findPrograms()
	if err != nil {
		return err
	}
	if base == "" {
		base = os.TempDir()
		if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
			base = "/dev/shm"
		}
	}
	sweepStale(base)
	if b.dir, err = os.MkdirTemp(base, "flyd-projects-bench-"); err != nil {
		return err
	}
	if b.dir, err = filepath.EvalSymlinks(b.dir); err != nil {
		return err
	}
	// Workloads that run as postgres reach their programs and data here.
	if err := os.Chmod(b.dir, 0o755); err != nil {
		return err
	}
	// What a run killed outright (SIGKILL) leaves, the next one finds by
	// this file and removes.
	b.cgParent = fmt.Sprintf("flyd-projects-bench-%d", os.Getpid())
	if err := os.WriteFile(filepath.Join(b.dir, "owner"), []byte(fmt.Sprintf("%d %s\n", os.Getpid(), b.cgParent)), 0o644); err != nil {
		return err
	}
	if err := b.writeStack(progs); err != nil {
		return err
	}
	if b.shopSrc != "" {
		if err := b.startShop(b.shopSrc, progs); err != nil {
			return err
		}
	}
	if err := b.startDaemon(ctx); err != nil {
		return err
	}
	up, down, answers := b.upAll, b.downAll, b.answers
	composeUp := func(projects []string) ([]time.Duration, error) { return b.compose.upAll(ctx, projects, b.timeout) }
	composeDown := func(projects []string) ([]time.Duration, error) { return b.compose.downAll(ctx, projects) }
	if b.shop != nil {
		up, down, answers = b.shopUpAll, b.shopDownAll, b.shopAnswers
		composeUp = func(projects []string) ([]time.Duration, error) {
			return b.compose.shopUpAll(ctx, b.shop, projects, b.timeout)
		}
		composeDown = func(projects []string) ([]time.Duration, error) { return b.compose.shopDownAll(ctx, b.shop, projects) }
	}
	if b.withCompose {
		if err := b.startCompose(ctx, b.composeRoot); err != nil {
			return err
		}
		logf("compose warm-up: one copy up and down, untimed")
		if _, err := composeUp([]string{"bench-warm"}); err != nil {
			return err
		}
		if _, err := composeDown([]string{"bench-warm"}); err != nil {
			return err
		}
	}

	logf("warm-up: one copy up and down, untimed")
	if _, _, err := up(ctx, []string{"bench-warm"}); err != nil {
		return err
	}
	if _, _, err := down(ctx, []string{"bench-warm"}); err != nil {
		return err
	}
	res := map[int]*result{}
	for r := 1; r <= rounds; r++ {
		for _, n := range ns {
			projects := make([]string, n)
			for k := range projects {
				projects[k] = fmt.Sprintf("bench-%d", k)
			}
			if res[n] == nil {
				res[n] = &result{}
			}
			c := res[n]
			s0 := b.cpu()
			u, cliUp, err := up(ctx, projects)
			if err != nil {
				return err
			}
			s1 := b.cpu()
			if err := answers(ctx, projects); err != nil {
				return err
			}
			s2 := b.cpu()
			d, cliDown, err := down(ctx, projects)
			if err != nil {
				return err
			}
			s3 := b.cpu()
			c.ups, c.downs = append(c.ups, u), append(c.downs, d)
			if b.compose != nil {
				cu, err := composeUp(projects)
				if err != nil {
					return err
				}
				cd, err := composeDown(projects)
				if err != nil {
					return err
				}
				c.composeUps, c.composeDowns = append(c.composeUps, cu), append(c.composeDowns, cd)
				logf("round %d/%d, %d at once under compose: up %s; down %s", r, rounds, n, msList(cu), msList(cd))
			}
			c.flydUp += s1.own - s0.own + cliUp
			c.flydDown += s3.own - s2.own + cliDown
			c.workloads += s3.children - s0.children
			c.copies += n
			logf("round %d/%d, %d at once: up %s; down %s; CPU: daemon %s up, %s down; CLIs %s up, %s down; workloads %s",
				r, rounds, n, msList(u), msList(d), ms(s1.own-s0.own), ms(s3.own-s2.own), ms(cliUp), ms(cliDown), ms(s3.children-s0.children))
		}
	}

	if b.shop != nil {
		b.printTable(ns, rounds, runs, res, nil, nil, nil)
		return nil
	}
	logf("flyd run -- true against true and up --wait + down, %d runs each, interleaved", runs)
	direct, updown, runTrue, err := b.runOverhead(ctx, runs)
	if err != nil {
		return err
	}
	b.printTable(ns, rounds, runs, res, direct, updown, runTrue)
	return nil
}

// writeStack writes the five-service stack and the small project.
func (b *bench) writeStack(p programs) error {
	b.stack = filepath.Join(b.dir, "stack")
	b.small = filepath.Join(b.dir, "small")
	data := filepath.Join(b.dir, "data")
	for _, d := range []string{b.stack, b.small, data} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	// Each copy's postgres (as the postgres user) makes its cluster here.
	if err := os.Chmod(data, 0o1777); err != nil {
		return err
	}
	files := map[string]string{
		filepath.Join(b.stack, ".env"): fmt.Sprintf("PGBIN=%s\nREDIS=%s\nNGINX=%s\nPYTHON=%s\nDATA=%s\nHERE=%s\n",
			p.pgBin, p.redis, p.nginx, p.python, data, b.stack),
		filepath.Join(b.stack, "app.py"):        appPy,
		filepath.Join(b.stack, "nginx.conf.in"): nginxConf,
		filepath.Join(b.stack, "stack.yaml"):    stackYAML,
		filepath.Join(b.small, "small.yaml"):    smallYAML,
	}
	for path, text := range files {
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// The stack. `${VAR}` comes from the .env beside it when the files are
// read; `$VAR` is the shell's, at the workload's start.
const stackYAML = `kind: network
name: net
---
# A fresh cluster for each copy, under the copy's own name.
name: initdb
network: net
user: postgres
restart: {policy: never}
command: [sh, -c, 'rm -rf "${DATA}/pg-$FLYD_PROJECT" && exec "${PGBIN}/initdb" -D "${DATA}/pg-$FLYD_PROJECT" -U postgres --auth=trust -E UTF8']
---
name: pg
identity: {module: store, service: pg}
network: net
user: postgres
after: ["initdb:completed"]
command: [sh, -c, 'exec "${PGBIN}/postgres" -D "${DATA}/pg-$FLYD_PROJECT" -p 5432 -c listen_addresses=127.0.0.1 -c unix_socket_directories=']
endpoints: [{name: tcp, port: 5432}]
health: {tcp: tcp, interval: 200ms}
stop: {signal: SIGINT, mode: main, timeout: 20s}
---
# The copy's name, written into its database.
name: seed
network: net
uses: [pg]
restart: {policy: never}
command: [sh, -c, 'hp=$CODEFLY__ENDPOINT__STORE__PG__TCP__TCP; exec psql -h "$(echo $hp | cut -d: -f1)" -p "$(echo $hp | cut -d: -f2)" -U postgres -v ON_ERROR_STOP=1 -c "create table copy (name text)" -c "insert into copy values (''$FLYD_PROJECT'')"']
---
name: redis
identity: {module: store, service: redis}
network: net
command: ["${REDIS}", --port, "6379", --bind, 127.0.0.1, --save, "", --appendonly, "no", --dir, /tmp]
endpoints: [{name: tcp, port: 6379}]
health: {tcp: tcp, send: "PING\r\n", expect: "+PONG", interval: 200ms}
---
name: app
network: net
uses: [pg, redis]
after: ["seed:completed"]
command: ["${PYTHON}", "${HERE}/app.py"]
endpoints: [{name: http, api: http}]
health: {http: {endpoint: http, path: /health}, interval: 200ms}
---
name: web
network: net
uses: [app]
command: [sh, -c, 'd="${DATA}/web-$FLYD_PROJECT"; mkdir -p "$d" && sed -e "s|@DIR@|$d|g" -e "s|@PORT@|$FLYD_PORT_HTTP|" -e "s|@APP@|$CODEFLY__ENDPOINT__APP__APP__HTTP__HTTP|" "${HERE}/nginx.conf.in" > "$d/nginx.conf" && exec "${NGINX}" -e stderr -c "$d/nginx.conf" -g "daemon off;"']
endpoints: [{name: http, api: http, publish: hashed}]
health: {tcp: http, interval: 200ms}
stop: {signal: SIGQUIT, mode: main}
`

const nginxConf = `pid @DIR@/nginx.pid;
error_log stderr;
events {}
http {
    access_log off;
    client_body_temp_path @DIR@/body;
    proxy_temp_path @DIR@/proxy;
    fastcgi_temp_path @DIR@/fastcgi;
    uwsgi_temp_path @DIR@/uwsgi;
    scgi_temp_path @DIR@/scgi;
    server {
        listen 127.0.0.1:@PORT@;
        location / { proxy_pass @APP@; }
    }
}
`

const appPy = `import http.server
import os
import subprocess


def host_port(name):
    return os.environ[name].rsplit(":", 1)


PG = host_port("CODEFLY__ENDPOINT__STORE__PG__TCP__TCP")
REDIS = host_port("CODEFLY__ENDPOINT__STORE__REDIS__TCP__TCP")


def out(*cmd):
    return subprocess.run(cmd, capture_output=True, text=True).stdout.strip()


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path == "/health":
            body = b"ok\n"
        else:
            name = out("psql", "-h", PG[0], "-p", PG[1], "-U", "postgres", "-Atc", "select name from copy")
            hits = out("redis-cli", "-h", REDIS[0], "-p", REDIS[1], "incr", "hits")
            body = ("copy=%s hits=%s\n" % (name, hits)).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


http.server.HTTPServer(("127.0.0.1", int(os.environ["FLYD_PORT_HTTP"])), Handler).serve_forever()
`

// smallYAML is the small project around `flyd run`: a network and one idle
// workload in it. Its health check passes at once, so --wait does not wait
// the second a workload without one must run to count as up.
const smallYAML = `kind: network
name: net
---
name: idle
network: net
command: [sleep, infinity]
health: {exec: ["true"], interval: 100ms}
`

// cliEnv is the environment of the daemon and of every CLI call: this
// one's, without what would point them elsewhere.
func (b *bench) cliEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "FLYD_") || k == "NOTIFY_SOCKET" {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "FLYD_HOME="+b.dir, "FLYD_SOCKET="+b.sock)
}

func (b *bench) startDaemon(ctx context.Context) error {
	b.sock = filepath.Join(b.dir, "flyd.sock")
	b.runDir = filepath.Join(b.dir, "run")
	b.daemonLog = filepath.Join(b.dir, "daemon.log")
	config := filepath.Join(b.dir, "flyd.yaml")
	if err := os.WriteFile(config, nil, 0o644); err != nil {
		return err
	}
	for _, d := range []string{"workloads.d", "state"} {
		if err := os.MkdirAll(filepath.Join(b.dir, d), 0o755); err != nil {
			return err
		}
	}
	logFile, err := os.Create(b.daemonLog)
	if err != nil {
		return err
	}
	defer logFile.Close()
	// flyd-daemon itself, as `flyd daemon` would exec it: the exec, made
	// from another thread than the process's first, would lose Pdeathsig.
	cmd := exec.Command(filepath.Join(filepath.Dir(b.flyd), "flyd-daemon"), "daemon", "--config", config, "--socket", b.sock,
		"--state-dir", filepath.Join(b.dir, "state"), "--run-dir", b.runDir,
		"--workloads-dir", filepath.Join(b.dir, "workloads.d"), "--cgroup-parent", b.cgParent,
		"--registry", "off", "--network-pool", b.pool, "--log-level", "warn",
		// Should this program be killed outright, the daemon is told to
		// go (Pdeathsig) and takes its workloads with it.
		"--stop-workloads-on-exit")
	if b.shop != nil {
		cmd.Args = append(cmd.Args, "--containerd-socket", b.shop.ctrd.Socket)
	}
	cmd.Dir = b.dir
	cmd.Env = b.cliEnv()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Its own process group: a Ctrl-C at the terminal reaches this
	// program, which takes the projects down through the daemon first.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		return err
	}
	b.daemon = cmd
	b.daemonDone = make(chan struct{})
	go func() { _ = cmd.Wait(); close(b.daemonDone) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := b.cli(ctx, 5*time.Second, "status"); err == nil {
			return nil
		}
		select {
		case <-b.daemonDone:
			return fmt.Errorf("flyd daemon exited before it answered; its log:\n%s", b.tail(b.daemonLog, 20))
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("flyd daemon did not answer within 30s; its log:\n%s", b.tail(b.daemonLog, 20))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (b *bench) tail(path string, n int) string {
	data, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// command is one CLI call, in its own process group, bounded by limit.
func (b *bench) command(ctx context.Context, limit time.Duration, name string, args ...string) (*exec.Cmd, context.CancelFunc) {
	cctx, cancel := context.WithTimeout(ctx, limit)
	cmd := exec.CommandContext(cctx, name, args...)
	cmd.Dir = b.dir
	cmd.Env = b.cliEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// SIGTERM, which `flyd run` answers by taking its project down.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 30 * time.Second
	return cmd, cancel
}

// cli runs the flyd CLI and returns its stdout; an error carries both.
func (b *bench) cli(ctx context.Context, limit time.Duration, args ...string) ([]byte, error) {
	cmd, cancel := b.command(ctx, limit, b.flyd, args...)
	defer cancel()
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return out.Bytes(), fmt.Errorf("flyd %s: %v\n%s%s", strings.Join(args, " "), err, out.String(), errOut.String())
	}
	return out.Bytes(), nil
}

// timedAll runs one CLI call per project at once and times each from its
// start until it returns. Every call is made ready first, then all are
// let go together.
func (b *bench) timedAll(ctx context.Context, projects []string, args func(p string) []string) ([]time.Duration, time.Duration, error) {
	times := make([]time.Duration, len(projects))
	cpus := make([]time.Duration, len(projects))
	errs := make([]error, len(projects))
	ready, start := sync.WaitGroup{}, make(chan struct{})
	var wg sync.WaitGroup
	for k, p := range projects {
		ready.Add(1)
		wg.Go(func() {
			cmd, cancel := b.command(ctx, b.timeout+time.Minute, b.flyd, args(p)...)
			defer cancel()
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			ready.Done()
			<-start
			t0 := time.Now()
			err := cmd.Run()
			times[k] = time.Since(t0)
			if cmd.ProcessState != nil {
				cpus[k] = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
			}
			if err != nil {
				errs[k] = fmt.Errorf("flyd %s: %v after %s\n%s", strings.Join(args(p), " "), err, times[k].Round(time.Millisecond), out.String())
			}
		})
	}
	ready.Wait()
	close(start)
	wg.Wait()
	var cpu time.Duration
	for _, c := range cpus {
		cpu += c
	}
	return times, cpu, errors.Join(errs...)
}

func (b *bench) upAll(ctx context.Context, projects []string) ([]time.Duration, time.Duration, error) {
	for _, p := range projects {
		b.used.Store(p, true)
	}
	return b.timedAll(ctx, projects, func(p string) []string {
		return []string{"up", "-p", p, "-f", b.stack, "--wait", "--timeout", b.timeout.String()}
	})
}

// downAll takes the projects down at once, timed, then checks each is gone.
func (b *bench) downAll(ctx context.Context, projects []string) ([]time.Duration, time.Duration, error) {
	times, cpu, err := b.timedAll(ctx, projects, func(p string) []string { return []string{"down", "-p", p} })
	if err != nil {
		return nil, 0, err
	}
	var left []error
	for _, p := range projects {
		if err := b.gone(ctx, p); err != nil {
			left = append(left, err)
		}
	}
	return times, cpu, errors.Join(left...)
}

// result is what was measured at one number of copies: each round's
// times, and the CPU summed over the rounds.
type result struct {
	ups, downs [][]time.Duration
	// composeUps and composeDowns are the same stack's under docker
	// compose, when measured.
	composeUps, composeDowns [][]time.Duration
	flydUp, flydDown         time.Duration // the daemon's (and its log holder's) own, and the CLIs'
	workloads                time.Duration // the workloads' processes, over their whole lives
	copies                   int           // copies measured, over the rounds
}

// cpuSnap is the CPU the daemon and its log holder have used themselves,
// and that of their children waited for: the daemon is the workloads'
// parent and subreaper, so every workload process that has ended, with
// what it waited for, is in children.
type cpuSnap struct{ own, children time.Duration }

func (b *bench) cpu() cpuSnap {
	var s cpuSnap
	pids := []int{b.daemon.Process.Pid}
	procs, _ := os.ReadDir("/proc")
	for _, e := range procs {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == pids[0] {
			continue
		}
		cmdline, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if bytes.Contains(cmdline, []byte("log-holder")) && bytes.Contains(cmdline, []byte(b.runDir+"/")) {
			pids = append(pids, pid)
		}
	}
	tick := time.Second / 100 // USER_HZ
	for _, pid := range pids {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		f := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+2:]))
		v := func(i int) time.Duration { n, _ := strconv.ParseInt(f[i], 10, 64); return time.Duration(n) * tick }
		s.own += v(11) + v(12)      // utime, stime
		s.children += v(13) + v(14) // cutime, cstime
	}
	return s
}

// gone fails, naming what, if anything of the project is left: a
// workload (`flyd ps`), a network (`flyd networks`), a network namespace
// or a cgroup of its workloads.
func (b *bench) gone(ctx context.Context, project string) error {
	var left []string
	for _, what := range []string{"ps", "networks"} {
		out, err := b.cli(ctx, 30*time.Second, what, "-p", project, "--json")
		if err != nil {
			return err
		}
		var items []struct {
			Name string `json:"name"`
		}
		if err := json.Unmarshal(out, &items); err != nil {
			return fmt.Errorf("flyd %s -p %s --json: %v: %s", what, project, err, out)
		}
		for _, it := range items {
			left = append(left, fmt.Sprintf("%s lists %s", what, it.Name))
		}
	}
	nsDir := filepath.Join(b.runDir, "netns")
	entries, _ := os.ReadDir(nsDir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), project+".") {
			left = append(left, "network namespace "+filepath.Join(nsDir, e.Name()))
		}
	}
	for _, pattern := range []string{"/sys/fs/cgroup/" + b.cgParent + "/" + project + "_*", "/sys/fs/cgroup/*/" + b.cgParent + "/" + project + "_*"} {
		m, _ := filepath.Glob(pattern)
		for _, c := range m {
			left = append(left, "cgroup "+c)
		}
	}
	if len(left) > 0 {
		return fmt.Errorf("LEFT BEHIND after flyd down -p %s: %s", project, strings.Join(left, "; "))
	}
	return nil
}

// answers checks, untimed, that each copy serves its own data on its own
// published port: nginx, the app, PostgreSQL and Redis of that copy.
func (b *bench) answers(ctx context.Context, projects []string) error {
	seen := map[int]string{}
	for _, p := range projects {
		port, err := b.published(ctx, p, p+".web")
		if err != nil {
			return err
		}
		if other, dup := seen[port]; dup {
			return fmt.Errorf("%s and %s publish the same host port %d", p, other, port)
		}
		seen[port] = p
		hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		req, _ := http.NewRequestWithContext(hctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/", port), nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			cancel()
			return fmt.Errorf("%s at 127.0.0.1:%d: %w", p, port, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		if !strings.HasPrefix(string(body), "copy="+p+" ") {
			return fmt.Errorf("%s at 127.0.0.1:%d answered %q; want its own copy's data", p, port, body)
		}
	}
	return nil
}

// published is the host port project p's workload publishes.
func (b *bench) published(ctx context.Context, p, workload string) (int, error) {
	out, err := b.cli(ctx, 30*time.Second, "ports", "-p", p, "--json")
	if err != nil {
		return 0, err
	}
	var ports []struct {
		Workload  string `json:"workload"`
		Published int    `json:"published"`
	}
	if err := json.Unmarshal(out, &ports); err != nil {
		return 0, fmt.Errorf("flyd ports -p %s --json: %v: %s", p, err, out)
	}
	for _, m := range ports {
		if m.Workload == workload && m.Published != 0 {
			return m.Published, nil
		}
	}
	return 0, fmt.Errorf("%s publishes no port: %s", workload, out)
}

// runOverhead times, interleaved, `true` run directly, `flyd up --wait`
// then `flyd down` of the small project, and `flyd run -- true` of it.
func (b *bench) runOverhead(ctx context.Context, runs int) (direct, updown, runTrue []time.Duration, err error) {
	const p = "bench-run"
	b.used.Store(p, true)
	trueBin, err := exec.LookPath("true")
	if err != nil {
		return nil, nil, nil, err
	}
	timed := func(name string, args ...string) (time.Duration, error) {
		cmd, cancel := b.command(ctx, b.timeout+time.Minute, name, args...)
		defer cancel()
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		t0 := time.Now()
		err := cmd.Run()
		d := time.Since(t0)
		if err != nil {
			return d, fmt.Errorf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out.String())
		}
		return d, nil
	}
	for i := -1; i < runs; i++ { // -1: a warm-up of each, not kept
		d0, err := timed(trueBin)
		if err != nil {
			return nil, nil, nil, err
		}
		d1, err := timed(b.flyd, "up", "-p", p, "-f", b.small, "--wait", "--timeout", b.timeout.String())
		if err != nil {
			return nil, nil, nil, err
		}
		d2, err := timed(b.flyd, "down", "-p", p)
		if err != nil {
			return nil, nil, nil, err
		}
		if err := b.gone(ctx, p); err != nil {
			return nil, nil, nil, err
		}
		d3, err := timed(b.flyd, "run", "-p", p, "-f", b.small, "--timeout", b.timeout.String(), "--", trueBin)
		if err != nil {
			return nil, nil, nil, err
		}
		if err := b.gone(ctx, p); err != nil {
			return nil, nil, nil, err
		}
		if i >= 0 {
			direct, updown, runTrue = append(direct, d0), append(updown, d1+d2), append(runTrue, d3)
		}
	}
	logf("true %s; up+down %s; run %s", msList(direct), msList(updown), msList(runTrue))
	return direct, updown, runTrue, nil
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func ms(d time.Duration) string {
	v := float64(d.Microseconds()) / 1000
	switch {
	case v >= 100:
		return commas(int64(v + 0.5))
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

func commas(n int64) string {
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func msList(ds []time.Duration) string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = ms(d)
	}
	return strings.Join(out, " ") + " ms"
}

func ratio(a, b time.Duration) string { return fmt.Sprintf("%.2fx", float64(a)/float64(b)) }

func (b *bench) printTable(ns []int, rounds, runs int, res map[int]*result, direct, updown, runTrue []time.Duration) {
	// p50: over every copy of every round. max: the slowest copy of a
	// round (when the last of them is up, or down), the median of the
	// rounds'.
	p50 := func(rs [][]time.Duration) time.Duration { return median(slices.Concat(rs...)) }
	slowest := func(rs [][]time.Duration) time.Duration {
		var m []time.Duration
		for _, r := range rs {
			m = append(m, slices.Max(r))
		}
		return median(m)
	}
	one := slices.Min(ns) // the ratios are against the fewest copies: one, by default
	copies := func(n int) string {
		if n == 1 {
			return "1 copy"
		}
		return fmt.Sprintf("%d copies at once", n)
	}
	var uts unix.Utsname
	_ = unix.Uname(&uts)
	ver, _ := b.cli(context.Background(), 10*time.Second, "version")
	fmt.Printf("machine: %d cores, kernel %s, %s; %s\n", nproc(), unix.ByteSliceToString(uts.Release[:]),
		time.Now().UTC().Format("2006-01-02T15:04Z"), strings.TrimSpace(string(ver)))
	if b.shop != nil {
		fmt.Printf("the shop's compose files (%s); %d rounds at each number of copies; load average %s at the start, %s at the end\n\n",
			b.shopSrc, rounds, b.loadStart, loadavg())
	} else {
		fmt.Printf("%d rounds at each number of copies; the small project: %d runs of each, interleaved; load average %s at the start, %s at the end\n\n",
			rounds, runs, b.loadStart, loadavg())
	}
	fmt.Println("| | p50 ms | max ms | ratio | CPU ms a copy: flyd · workloads |")
	fmt.Println("| --- | ---: | ---: | ---: | ---: |")
	for _, n := range ns {
		r := res[n]
		fmt.Printf("| `flyd up --wait`, %s | %s | %s | %s | %s · %s |\n", copies(n), ms(p50(r.ups)), ms(slowest(r.ups)),
			ratio(slowest(r.ups), slowest(res[one].ups)), ms(r.flydUp/time.Duration(r.copies)), ms(r.workloads/time.Duration(r.copies)))
	}
	down := "`flyd down`"
	if b.shop != nil {
		down = "`flyd down --volumes`"
	}
	for _, n := range ns {
		r := res[n]
		fmt.Printf("| %s, %s | %s | %s | %s | %s |\n", down, copies(n), ms(p50(r.downs)), ms(slowest(r.downs)),
			ratio(slowest(r.downs), slowest(res[one].downs)), ms(r.flydDown/time.Duration(r.copies)))
	}
	if b.compose != nil {
		for _, n := range ns {
			r := res[n]
			fmt.Printf("| `docker-compose up -d` until it answers, %s | %s | %s | %s · %s flyd's | |\n", copies(n), ms(p50(r.composeUps)), ms(slowest(r.composeUps)),
				ratio(slowest(r.composeUps), slowest(res[one].composeUps)), ratio(slowest(r.composeUps), slowest(r.ups)))
		}
		for _, n := range ns {
			r := res[n]
			fmt.Printf("| `docker-compose down --volumes`, %s | %s | %s | %s · %s flyd's | |\n", copies(n), ms(p50(r.composeDowns)), ms(slowest(r.composeDowns)),
				ratio(slowest(r.composeDowns), slowest(res[one].composeDowns)), ratio(slowest(r.composeDowns), slowest(r.downs)))
		}
	}
	if len(direct) == 0 {
		return
	}
	mt, mu, mr := median(direct), median(updown), median(runTrue)
	fmt.Printf("| `true`, run directly | %s | %s | | |\n", ms(mt), ms(slices.Max(direct)))
	fmt.Printf("| `flyd up --wait` + `flyd down` of the small project | %s | %s | %s `true` | |\n", ms(mu), ms(slices.Max(updown)), ratio(mu, mt))
	fmt.Printf("| `flyd run -- true` of the small project | %s | %s | %s `true` · %s up + down | |\n", ms(mr), ms(slices.Max(runTrue)), ratio(mr, mt), ratio(mr, mu))
}

// pgSegments are PostgreSQL's dynamic shared memory segments in /dev/shm,
// those of the postgres user.
func pgSegments() map[string]bool {
	out := map[string]bool{}
	m, _ := filepath.Glob("/dev/shm/PostgreSQL.*")
	for _, path := range m {
		var st unix.Stat_t
		if unix.Stat(path, &st) != nil {
			continue
		}
		if u, err := user.LookupId(strconv.Itoa(int(st.Uid))); err == nil && u.Username == "postgres" {
			out[path] = true
		}
	}
	return out
}

// loadavg is the host's 1-minute load average: what else ran meanwhile.
func loadavg() string {
	data, _ := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(data)); len(f) > 0 {
		return f[0]
	}
	return "?"
}

func nproc() int {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return 0
	}
	return set.Count()
}

// cleanup takes every project down through the daemon, stops it, then
// removes whatever of the daemon's is still on the host, and reports it:
// after a clean down and exit nothing should be.
func (b *bench) cleanup() error {
	if b.dir == "" {
		return nil
	}
	var errs []error
	daemonUp := b.daemon != nil
	if daemonUp {
		select {
		case <-b.daemonDone:
			daemonUp = false
			errs = append(errs, fmt.Errorf("the flyd daemon had exited; its log:\n%s", b.tail(b.daemonLog, 20)))
		default:
		}
	}
	if daemonUp {
		ctx := context.Background()
		b.used.Range(func(k, _ any) bool {
			p := k.(string)
			if out, err := b.cli(ctx, 2*time.Minute, "down", "-p", p); err != nil && !strings.Contains(err.Error(), "no project named") {
				errs = append(errs, fmt.Errorf("cleanup: %w (%s)", err, out))
			}
			return true
		})
		for _, what := range []string{"ps", "networks"} {
			if out, err := b.cli(ctx, 30*time.Second, what, "--json"); err == nil && strings.TrimSpace(string(out)) != "[]" && strings.TrimSpace(string(out)) != "null" {
				errs = append(errs, fmt.Errorf("cleanup: after every down, flyd %s still lists: %s", what, out))
			}
		}
		_ = b.daemon.Process.Signal(syscall.SIGTERM)
		select {
		case <-b.daemonDone:
		case <-time.After(15 * time.Second):
			errs = append(errs, errors.New("cleanup: the flyd daemon did not exit within 15s of SIGTERM: SIGKILL"))
			_ = b.daemon.Process.Kill()
			<-b.daemonDone
		}
	}
	if b.shop != nil {
		b.shop.close()
	}
	if b.compose != nil {
		if err := b.compose.cleanup(); err != nil {
			errs = append(errs, err)
		}
	}
	if left := b.sweep(); len(left) > 0 {
		errs = append(errs, fmt.Errorf("LEFT BEHIND on the host after the daemon exited, now removed: %s", strings.Join(left, "; ")))
	}
	if len(errs) > 0 {
		if log := b.tail(b.daemonLog, 30); log != "" {
			errs = append(errs, fmt.Errorf("daemon log (last lines):\n%s", log))
		}
	}
	if err := os.RemoveAll(b.dir); err != nil {
		errs = append(errs, fmt.Errorf("cleanup: %w", err))
	}
	return errors.Join(errs...)
}

// sweepStale removes what runs killed outright left under base: the
// directories whose owner is gone, with their processes, cgroups, table,
// links and mounts.
func sweepStale(base string) {
	dirs, _ := filepath.Glob(filepath.Join(base, "flyd-projects-bench-*"))
	for _, dir := range dirs {
		data, err := os.ReadFile(filepath.Join(dir, "owner"))
		f := strings.Fields(string(data))
		if err != nil || len(f) != 2 {
			continue
		}
		if pid, err := strconv.Atoi(f[0]); err != nil || syscall.Kill(pid, 0) == nil {
			continue // its run is still going
		}
		old := &bench{dir: dir, runDir: filepath.Join(dir, "run"), cgParent: f[1]}
		left := old.sweep()
		_ = os.RemoveAll(dir)
		logf("removed what a run killed outright left in %s: %s", dir, strings.Join(append(left, "its directory"), "; "))
	}
}

// sweep removes, and names, what of this run is still on the host:
// processes (in the daemon's cgroups, or with the directory in their
// command line), the cgroups, the nftables table, links to the networks,
// and mounts under the directory.
func (b *bench) sweep() []string {
	var left []string
	cgroups := func() []string {
		var dirs []string
		for _, pattern := range []string{"/sys/fs/cgroup/" + b.cgParent, "/sys/fs/cgroup/*/" + b.cgParent} {
			m, _ := filepath.Glob(pattern)
			dirs = append(dirs, m...)
		}
		return dirs
	}
	ours := func() map[int]bool {
		pids := map[int]bool{}
		for _, root := range cgroups() {
			_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
				if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
					return nil
				}
				data, _ := os.ReadFile(path)
				for _, f := range strings.Fields(string(data)) {
					if pid, err := strconv.Atoi(f); err == nil {
						pids[pid] = true
					}
				}
				return nil
			})
		}
		procs, _ := os.ReadDir("/proc")
		for _, e := range procs {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == os.Getpid() {
				continue
			}
			cmdline, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
			if bytes.Contains(cmdline, []byte(b.dir+"/")) {
				pids[pid] = true
			}
		}
		return pids
	}
	// What the daemon started may take a moment to follow it out (its log
	// holder leaves once it holds nothing and its daemon is gone).
	for deadline := time.Now().Add(5 * time.Second); len(ours()) > 0 && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
	}
	for try := 0; try < 50; try++ {
		pids := ours()
		if len(pids) == 0 {
			break
		}
		for pid := range pids {
			if try == 0 {
				cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
				left = append(left, fmt.Sprintf("process %d, 5s after the daemon exited (%s)", pid, strings.TrimSpace(string(bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '})))))
			}
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, root := range cgroups() {
		var dirs []string
		_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			if dirs[i] != root {
				left = append(left, "cgroup "+dirs[i])
			}
			_ = os.Remove(dirs[i])
		}
	}
	if b.runDir != "" {
		table := instance.Name(b.runDir)
		if ok, _, err := firewall.Exists(table); err == nil && ok {
			left = append(left, "nftables table "+table)
			_ = firewall.Purge(table)
		}
		links, _ := netlink.LinkList()
		for _, l := range links {
			if strings.HasPrefix(l.Attrs().Alias, b.runDir+"/") {
				left = append(left, fmt.Sprintf("link %s (%s)", l.Attrs().Name, l.Attrs().Alias))
				_ = netlink.LinkDel(l)
			}
		}
	}
	// A PostgreSQL killed before it could clean up (an initdb whose
	// project went down under it) leaves its dynamic shared memory in
	// /dev/shm: the segments made during this run that no process maps.
	if b.shmBefore != nil {
		mapped := map[string]bool{}
		procs, _ := os.ReadDir("/proc")
		for _, e := range procs {
			data, _ := os.ReadFile("/proc/" + e.Name() + "/maps")
			for _, line := range strings.Split(string(data), "\n") {
				if i := strings.Index(line, "/dev/shm/PostgreSQL."); i >= 0 {
					mapped[strings.TrimSuffix(line[i:], " (deleted)")] = true
				}
			}
		}
		for path := range pgSegments() {
			if !b.shmBefore[path] && !mapped[path] {
				left = append(left, "PostgreSQL's shared memory "+path)
				_ = os.Remove(path)
			}
		}
	}
	mounts, _ := os.ReadFile("/proc/self/mounts")
	var points []string
	for _, line := range strings.Split(string(mounts), "\n") {
		if f := strings.Fields(line); len(f) > 1 && strings.HasPrefix(f[1], b.dir+"/") {
			points = append(points, f[1])
		}
	}
	slices.Sort(points)
	for i := len(points) - 1; i >= 0; i-- {
		left = append(left, "mount "+points[i])
		_ = unix.Unmount(points[i], unix.MNT_DETACH)
	}
	return left
}
