package integration

import (
	"fmt"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flyd-dev/flyd/api"
)

// replicaPids asks a published port n times, each on a new connection,
// and says which pids answered, and how often.
func replicaPids(t *testing.T, addr string, n int) map[int]int {
	t.Helper()
	pid := regexp.MustCompile(`pid=(\d+)`)
	seen := map[int]int{}
	for range n {
		b, err := httpGet(addr, "/")
		if err != nil {
			t.Fatalf("GET %s: %v", addr, err)
		}
		m := pid.FindStringSubmatch(b)
		if m == nil {
			t.Fatalf("GET %s: no pid in %q", addr, b)
		}
		p, _ := strconv.Atoi(m[1])
		seen[p]++
	}
	return seen
}

// pidsOf are the pids of the named workloads' runs.
func (d *daemon) pidsOf(t *testing.T, names ...string) []int {
	t.Helper()
	var out []int
	for _, n := range names {
		out = append(out, d.get(t, n).PID)
	}
	slices.Sort(out)
	return out
}

func keysOf(m map[int]int) []int {
	var out []int
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestReplicasBehindOnePublishedPort: replicas: 3 runs web-1 to web-3,
// each on a port of its own, behind one published port that takes each
// new connection to the next ready replica; a stopped replica takes none
// until it is ready again; scale 2 removes web-3; an apply that changes
// the spec replaces them one at a time, each ready before the next, while
// the published port answers every request; rm of the group removes every
// replica and frees the port.
func TestReplicasBehindOnePublishedPort(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	hp := freePort(t)
	addr := "127.0.0.1:" + strconv.Itoa(hp)
	text := func(n int, gen string) string {
		return fmt.Sprintf(`
name: web
replicas: %d
command: ["@PROG@", "serve", "${ADDR_HTTP}"]
env: {GEN: %q}
endpoints: [{name: http, api: http, port: ephemeral, publish: %d, visibility: public, exposure: public}]
health: {http: {endpoint: http, path: /}, interval: 100ms, timeout: 1s, failures: 1}
network: ci-rep
`, n, gen, hp)
	}
	file := d.writeSpec(t, "web.yaml", text(3, "one"))
	out := d.mustCLI(t, "apply", "-f", file, "--wait")
	for _, n := range []string{"web-1", "web-2", "web-3"} {
		if !strings.Contains(out, n+" up: running, healthy") {
			t.Errorf("apply --wait does not say %s is up: %q", n, out)
		}
	}
	ports := map[int]bool{}
	for _, n := range []string{"web-1", "web-2", "web-3"} {
		w := d.get(t, n)
		if w.Group != "web" || len(w.Ports) != 1 || w.Ports[0].Published != hp {
			t.Fatalf("%s: group %q, ports %+v", n, w.Group, w.Ports)
		}
		ports[w.Ports[0].Port] = true
	}
	if len(ports) != 3 {
		t.Errorf("replicas share inner ports: %v", ports)
	}
	// The group's name stands for its replicas: their logs, together.
	logs := d.mustCLI(t, "logs", "web")
	for _, n := range []string{"web-1", "web-2", "web-3"} {
		if !strings.Contains(logs, n) {
			t.Errorf("flyd logs web has no line of %s:\n%s", n, logs)
		}
	}
	all := d.pidsOf(t, "web-1", "web-2", "web-3")
	if got := keysOf(replicaPids(t, addr, 9)); !slices.Equal(got, all) {
		t.Errorf("9 connections reached pids %v, want every replica's %v", got, all)
	}
	var nets []api.Network
	decodeJSON(t, d.mustCLI(t, "networks", "--json"), &nets)
	if len(nets) != 1 || len(nets[0].Published) != 3 {
		t.Errorf("network ci-rep publishes %+v, want the port to each of 3 replicas", nets)
	}

	// A consumer in the group's network is given the balanced address.
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "client.yaml", `
name: client
command: ["sh", "-c", "echo at=${endpoint:web/web/http}; for i in 1 2 3 4 5 6; do @PROG@ get ${endpoint:web/web/http}; done"]
restart: {policy: never}
network: ci-rep
`))
	d.waitState(t, "client", api.StateExited)
	got := map[int]int{}
	for _, m := range regexp.MustCompile(`pid=(\d+)`).FindAllStringSubmatch(d.logs(t, "client"), -1) {
		p, _ := strconv.Atoi(m[1])
		got[p]++
	}
	if !slices.Equal(keysOf(got), all) {
		t.Errorf("a consumer's 6 requests reached pids %v, want every replica's %v", keysOf(got), all)
	}
	// At the group's own port in the network, not one of a replica's,
	// nor through the host.
	at := regexp.MustCompile(`at=http://localhost:(\d+)`).FindStringSubmatch(d.logs(t, "client"))
	if at == nil || ports[mustAtoi(at[1])] {
		t.Errorf("a consumer in the network is given %v; want the group's own port at localhost", at)
	}
	d.mustCLI(t, "rm", "client")

	// A group that publishes nothing is balanced in its network all the
	// same, and from the host at the network's address.
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "api.yaml", `
name: api
replicas: 2
command: ["@PROG@", "serve", "${ADDR_HTTP}"]
endpoints: [{name: http, api: http, port: ephemeral}]
network: ci-rep
`), "--wait")
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "hostclient.yaml", `
name: hostclient
command: ["sh", "-c", "for i in 1 2 3 4; do @PROG@ get ${endpoint:api/api/http}; done"]
restart: {policy: never}
`))
	d.waitState(t, "hostclient", api.StateExited)
	got = map[int]int{}
	for _, m := range regexp.MustCompile(`pid=(\d+)`).FindAllStringSubmatch(d.logs(t, "hostclient"), -1) {
		p, _ := strconv.Atoi(m[1])
		got[p]++
	}
	if want := d.pidsOf(t, "api-1", "api-2"); !slices.Equal(keysOf(got), want) {
		t.Errorf("a host consumer's 4 requests to an unpublished group reached pids %v, want %v", keysOf(got), want)
	}
	d.mustCLI(t, "rm", "hostclient", "api")

	// A stopped replica takes no connection; started and healthy again,
	// it does.
	d.mustCLI(t, "stop", "web-2")
	rest := d.pidsOf(t, "web-1", "web-3")
	if got := keysOf(replicaPids(t, addr, 6)); !slices.Equal(got, rest) {
		t.Errorf("with web-2 stopped, connections reached %v, want %v", got, rest)
	}
	d.mustCLI(t, "start", "web-2")
	d.waitWorkload(t, "web-2", "healthy", func(w *api.Workload) bool { return w.Healthy != nil && *w.Healthy })
	all = d.pidsOf(t, "web-1", "web-2", "web-3")
	eventually(t, "web-2 back in the balance", func() error {
		if got := keysOf(replicaPids(t, addr, 9)); !slices.Equal(got, all) {
			return fmt.Errorf("reached %v, want %v", got, all)
		}
		return nil
	})

	// Scale down: the last replica goes.
	d.mustCLI(t, "scale", "web", "2", "--wait")
	if _, _, code := runCLI(t, d.socket, "inspect", "web-3"); code == 0 {
		t.Error("web-3 is still there after scale 2")
	}
	two := d.pidsOf(t, "web-1", "web-2")
	if got := keysOf(replicaPids(t, addr, 6)); !slices.Equal(got, two) {
		t.Errorf("after scale 2, connections reached %v, want %v", got, two)
	}

	// A rolling replace: the port answers throughout.
	var failed, asked atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			asked.Add(1)
			if _, err := httpGet(addr, "/"); err != nil {
				failed.Add(1)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "web.yaml", text(2, "two")), "--wait")
	close(stop)
	wg.Wait()
	if failed.Load() > 0 || asked.Load() < 3 {
		t.Errorf("%d of %d requests failed during the rolling replace", failed.Load(), asked.Load())
	}
	t.Logf("%d requests during the rolling replace, none failed", asked.Load())
	now := d.pidsOf(t, "web-1", "web-2")
	if slices.ContainsFunc(now, func(p int) bool { return slices.Contains(two, p) }) {
		t.Errorf("pids %v after the replace, before %v: a replica was not replaced", now, two)
	}
	for _, n := range []string{"web-1", "web-2"} {
		if g := d.inspect(t, n).Spec.Env["GEN"]; g != "two" {
			t.Errorf("%s runs generation %q", n, g)
		}
	}

	// A replica is the group's: applied alone, or named by a spec, it is
	// refused.
	_, errOut, code := runCLI(t, d.socket, "apply", "-f", d.writeSpec(t, "r.yaml", `
name: web-1
command: ["@PROG@", "sleep"]
`))
	if code == 0 || !strings.Contains(errOut, "replica of web") {
		t.Errorf("applying web-1 over a replica: exit %d, %q", code, errOut)
	}

	d.mustCLI(t, "rm", "web")
	out = d.mustCLI(t, "ps")
	if strings.Contains(out, "web-") {
		t.Errorf("replicas left after rm web:\n%s", out)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Errorf("the group's published port is still held: %v", err)
	} else {
		l.Close()
	}
}

func mustAtoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
