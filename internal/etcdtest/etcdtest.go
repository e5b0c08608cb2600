// Package etcdtest runs a real etcd cluster for tests: members started from
// the etcd binary on free loopback ports, each with its own data directory,
// which can be killed and brought back to test quorum loss. It is for tests
// only; it is not a way to run etcd in production.
package etcdtest

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/flyd-dev/flyd/internal/testenv"
)

// startTimeout bounds how long a cluster may take to elect a leader.
const startTimeout = 30 * time.Second

// Cluster is a running etcd cluster.
type Cluster struct {
	bin     string
	dir     string
	token   string
	initial string // --initial-cluster
	members []*member
	certs   *Certs // clients on TLS with certificates, nil = plain http
}

type member struct {
	name      string
	clientURL string
	peerURL   string
	dataDir   string
	logPath   string
	// mu guards cmd and done, the member's process while it runs.
	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// Binary returns the etcd binary, or skips the test (fails it under
// CI=true) when there is none.
func Binary(tb testing.TB) string {
	tb.Helper()
	bin, err := exec.LookPath("etcd")
	if err != nil {
		testenv.Skip(tb, "no etcd binary on PATH (Debian: apt-get install etcd-server): the etcd store is tested against a real cluster")
	}
	return bin
}

// New starts an n-member cluster and waits until it answers; t's cleanup
// kills every member and removes their data.
func New(t testing.TB, n int) *Cluster {
	t.Helper()
	c, err := Start(Binary(t), t.TempDir(), n, func() int { return testenv.FreePort(t) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	return c
}

// NewTLS is New with the members' client URLs on https, and client
// certificates required (--client-cert-auth): certs made by NewCerts.
func NewTLS(t testing.TB, n int, certs *Certs) *Cluster {
	t.Helper()
	bin := Binary(t)
	dir := t.TempDir()
	var c *Cluster
	var err error
	for range 3 {
		c = &Cluster{certs: certs}
		if err = c.start(bin, dir, n, func() int { return testenv.FreePort(t) }); err == nil || !errors.Is(err, errPortTaken) {
			break
		}
		for i := range n {
			os.RemoveAll(filepath.Join(dir, "m"+strconv.Itoa(i)))
			os.Remove(filepath.Join(dir, "m"+strconv.Itoa(i)+".log"))
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	return c
}

// Start starts an n-member cluster of bin with its data under dir, the
// ports from port, and waits until it answers. For a cluster shared by a
// package's tests, started outside any one test; Stop stops it. A member
// that finds its port taken (another program bound it after port chose
// it) costs one more try on fresh ports.
func Start(bin, dir string, n int, port func() int) (*Cluster, error) {
	var err error
	for range 3 {
		c := &Cluster{}
		if err = c.start(bin, dir, n, port); err == nil || !errors.Is(err, errPortTaken) {
			if err != nil {
				return nil, err
			}
			return c, nil
		}
		for i := range n {
			os.RemoveAll(filepath.Join(dir, "m"+strconv.Itoa(i)))
			os.Remove(filepath.Join(dir, "m"+strconv.Itoa(i)+".log"))
		}
	}
	return nil, err
}

// errPortTaken marks a start that failed on a port in use.
var errPortTaken = errors.New("a port was taken")

func (c *Cluster) start(bin, dir string, n int, port func() int) error {
	c.bin, c.dir, c.token = bin, dir, fmt.Sprintf("flyd-test-%d-%d", os.Getpid(), time.Now().UnixNano())
	c.members = nil
	scheme := "http://"
	if c.certs != nil {
		scheme = "https://"
	}
	var initial []string
	for i := range n {
		m := &member{
			name:      "m" + strconv.Itoa(i),
			clientURL: scheme + "127.0.0.1:" + strconv.Itoa(port()),
			peerURL:   "http://127.0.0.1:" + strconv.Itoa(port()),
			dataDir:   filepath.Join(dir, "m"+strconv.Itoa(i)),
			logPath:   filepath.Join(dir, "m"+strconv.Itoa(i)+".log"),
		}
		c.members = append(c.members, m)
		initial = append(initial, m.name+"="+m.peerURL)
	}
	c.initial = strings.Join(initial, ",")
	for _, m := range c.members {
		if err := c.run(m, "new"); err != nil {
			c.Stop()
			return err
		}
	}
	if err := c.WaitHealthy(startTimeout); err != nil {
		c.Stop()
		return err
	}
	return nil
}

// run starts m's process.
func (c *Cluster) run(m *member, state string) error {
	log, err := os.OpenFile(m.logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer log.Close()
	var tlsArgs []string
	if c.certs != nil {
		tlsArgs = []string{"--cert-file", c.certs.ServerCert, "--key-file", c.certs.ServerKey,
			"--client-cert-auth", "--trusted-ca-file", c.certs.CA}
	}
	cmd := exec.Command(c.bin, append([]string{
		"--name", m.name,
		"--data-dir", m.dataDir,
		"--listen-client-urls", m.clientURL, "--advertise-client-urls", m.clientURL,
		"--listen-peer-urls", m.peerURL, "--initial-advertise-peer-urls", m.peerURL,
		"--initial-cluster", c.initial, "--initial-cluster-state", state,
		"--initial-cluster-token", c.token,
		// Quick elections on loopback keep member-loss tests short; the
		// minimum lease TTL etcd grants follows (1.5 election timeouts).
		"--heartbeat-interval", "50", "--election-timeout", "500",
		"--logger", "zap", "--log-level", "warn",
	}, tlsArgs...)...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	if arch, ok := os.LookupEnv("ETCD_UNSUPPORTED_ARCH"); ok {
		cmd.Env = append(cmd.Env, "ETCD_UNSUPPORTED_ARCH="+arch)
	}
	cmd.Stdout, cmd.Stderr = log, log
	// A test binary that dies must not leave etcd behind.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("etcdtest: starting %s: %w", m.name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	m.mu.Lock()
	m.cmd, m.done = cmd, done
	m.mu.Unlock()
	return nil
}

// Endpoints are the client URLs of every member, down or not.
func (c *Cluster) Endpoints() []string {
	out := make([]string, len(c.members))
	for i, m := range c.members {
		out[i] = m.clientURL
	}
	return out
}

// Pid is member i's process id, 0 while it is down.
func (c *Cluster) Pid(i int) int {
	m := c.members[i]
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd == nil {
		return 0
	}
	return m.cmd.Process.Pid
}

// Kill stops member i at once (SIGKILL), as a crash would.
func (c *Cluster) Kill(i int) {
	m := c.members[i]
	m.mu.Lock()
	cmd, done := m.cmd, m.done
	m.cmd = nil
	m.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-done
}

// Restart brings a killed member i back on its data directory.
func (c *Cluster) Restart(i int) error {
	return c.run(c.members[i], "existing")
}

// WaitHealthy waits until every running member reports a healthy cluster
// (a leader, and its own raft caught up).
func (c *Cluster) WaitHealthy(within time.Duration) error {
	tr := &http.Transport{DisableKeepAlives: true}
	if c.certs != nil {
		tc, err := c.certs.ClientTLS()
		if err != nil {
			return err
		}
		tr.TLSClientConfig = tc
	}
	hc := &http.Client{Timeout: time.Second, Transport: tr}
	defer hc.CloseIdleConnections()
	deadline := time.Now().Add(within)
	for {
		var bad error
		for _, m := range c.members {
			m.mu.Lock()
			cmd, done := m.cmd, m.done
			m.mu.Unlock()
			if cmd == nil {
				continue
			}
			select {
			case <-done:
				log := tail(m.logPath)
				err := fmt.Errorf("etcdtest: %s exited (%v):\n%s", m.name, cmd.ProcessState, log)
				if strings.Contains(log, "address already in use") {
					err = fmt.Errorf("%w: %w", errPortTaken, err)
				}
				return err
			default:
			}
			if err := health(hc, m.clientURL); err != nil {
				bad = fmt.Errorf("%s: %w", m.name, err)
				break
			}
		}
		if bad == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("etcdtest: cluster not healthy within %s: %w", within, bad)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func health(hc *http.Client, url string) error {
	resp, err := hc.Get(url + "/health")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var b [256]byte
	n, _ := resp.Body.Read(b[:])
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b[:n]), `"true"`) {
		return fmt.Errorf("unhealthy: HTTP %d %s", resp.StatusCode, b[:n])
	}
	return nil
}

// Stop kills every member; their data goes with the directory's owner.
func (c *Cluster) Stop() {
	for i := range c.members {
		c.Kill(i)
	}
}

func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}
