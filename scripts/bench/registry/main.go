// Command registry measures the registry on etcd under a fleet: a 3-member
// etcd cluster on this machine, two `flyd registry serve --store etcd`
// replicas, and simulated registrants (flyd's own registrar and client),
// each heart-beating its instances at the contract's period (a third of
// the TTL). It reports heartbeat latency, etcd's commits and fsyncs per
// second, the CPU and memory of etcd and of the replicas, how late
// instances whose heartbeats stop are gone, and whether any live instance
// is lost when an etcd member and a replica are killed under the load.
//
//	go run ./scripts/bench/registry -daemon /path/to/flyd-daemon [-registrants 10 -per 1000 -ttl 30s]
//
// -daemon may be built from any version of flyd, so a run of an older
// registry measures it the same way (a registry that refuses the batch
// register or heartbeat gets one request per instance, as any old client
// would send). Everything it starts is stopped on exit, or on SIGINT or
// SIGTERM; its files live in a temporary directory that goes with it.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/flyd-dev/flyd/internal/etcdtest"
	"github.com/flyd-dev/flyd/registrar"
	"github.com/flyd-dev/flyd/registryclient"
)

var progress bool

func main() {
	daemon := flag.String("daemon", "", "the flyd-daemon binary whose registry is measured")
	registrants := flag.Int("registrants", 10, "simulated registrants (daemons)")
	per := flag.Int("per", 1000, "instances per registrant")
	ttl := flag.Duration("ttl", 30*time.Second, "the instances' lease")
	window := flag.Duration("window", 0, "how long the steady state is measured (default: one TTL)")
	mortal := flag.Int("mortal", 100, "instances whose heartbeats stop, for expiry accuracy")
	flag.BoolVar(&progress, "progress", false, "print the count of registered instances each second until all are")
	flag.Parse()
	if *window == 0 {
		*window = *ttl
	}
	if *daemon == "" {
		fmt.Fprintln(os.Stderr, "-daemon is required")
		os.Exit(2)
	}
	if err := run(*daemon, *registrants, *per, *ttl, *window, *mortal); err != nil {
		fmt.Fprintln(os.Stderr, "registry bench:", err)
		os.Exit(1)
	}
}

// timed wraps the client to record each heartbeat request's latency. It
// sends one request per instance, as a client of the contract alone does;
// batched adds the batch extensions, for a registry that takes them.
type timed struct {
	cl *registryclient.Client
	// mu guards lat, last, gone and regs.
	mu   sync.Mutex
	lat  []time.Duration
	last map[string]time.Time // the last acknowledged heartbeat or register of each id
	gone int                  // heartbeats answered 410: instances the registry lost
	regs int                  // instances registered (again)
}

func (t *timed) note(d time.Duration, ids []string, errs []error) {
	now := time.Now()
	t.mu.Lock()
	t.lat = append(t.lat, d)
	for i, id := range ids {
		switch {
		case errs[i] == nil:
			t.last[id] = now
		case errors.Is(errs[i], registryclient.ErrGone):
			t.gone++
		}
	}
	t.mu.Unlock()
}

// counts returns the 410s and registers so far.
func (t *timed) counts() (gone, regs int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.gone, t.regs
}

func (t *timed) Register(ctx context.Context, in registryclient.Instance) (string, bool, error) {
	id, c, err := t.cl.Register(ctx, in)
	if err == nil {
		t.mu.Lock()
		t.last[in.ID] = time.Now()
		t.regs++
		t.mu.Unlock()
	}
	return id, c, err
}

func (t *timed) Deregister(ctx context.Context, id string) error { return t.cl.Deregister(ctx, id) }

// batched is timed with the batch register and heartbeat.
type batched struct{ *timed }

func (t batched) RegisterMany(ctx context.Context, ins []registryclient.Instance) []error {
	errs := t.cl.RegisterMany(ctx, ins)
	now := time.Now()
	t.mu.Lock()
	for i, err := range errs {
		if err == nil {
			t.last[ins[i].ID] = now
			t.regs++
		}
	}
	t.mu.Unlock()
	return errs
}

func (t *timed) Heartbeat(ctx context.Context, id string) error {
	start := time.Now()
	err := t.cl.Heartbeat(ctx, id)
	t.note(time.Since(start), []string{id}, []error{err})
	return err
}

func (t batched) HeartbeatMany(ctx context.Context, ids []string) []error {
	start := time.Now()
	errs := t.cl.HeartbeatMany(ctx, ids)
	t.note(time.Since(start), ids, errs)
	return errs
}

// proc is a process whose CPU and memory are sampled.
type proc struct {
	name string
	pid  int
}

func cpuTicks(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return u + s, nil
}

func rssKiB(pid int) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
			return n
		}
	}
	return 0
}

// metric sums an etcd counter over the members that answer.
func metric(endpoints []string, name string) float64 {
	var sum float64
	for _, ep := range endpoints {
		resp, err := http.Get(ep + "/metrics")
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			l := sc.Text()
			if strings.HasPrefix(l, name+" ") {
				v, _ := strconv.ParseFloat(strings.Fields(l)[1], 64)
				sum += v
			}
		}
		resp.Body.Close()
	}
	return sum
}

func run(daemon string, registrants, per int, ttl, window time.Duration, mortal int) error {
	bin, err := exec.LookPath("etcd")
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "flyd-registry-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	// Interrupted, it leaves nothing either: the processes it started die
	// with it (Pdeathsig), the directory is removed here.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	var started struct {
		sync.Mutex // guards c and reps
		c          *etcdtest.Cluster
		reps       []*exec.Cmd
	}
	go func() {
		if _, ok := <-sigs; !ok {
			return
		}
		fmt.Fprintln(os.Stderr, "registry bench: interrupted; stopping what it started")
		started.Lock() // and kept: nothing starts any more
		for _, r := range started.reps {
			_ = r.Process.Kill()
			_ = r.Wait()
		}
		if started.c != nil {
			started.c.Stop()
		}
		os.RemoveAll(dir)
		os.Exit(130)
	}()
	port := func() int {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			panic(err)
		}
		defer l.Close()
		return l.Addr().(*net.TCPAddr).Port
	}
	started.Lock()
	c, err := etcdtest.Start(bin, dir, 3, port)
	started.c = c
	started.Unlock()
	if err != nil {
		return err
	}
	defer c.Stop()
	keyFile := filepath.Join(dir, "registry.key")
	if err := os.WriteFile(keyFile, []byte("bench-key-0123456789abcdef\n"), 0o600); err != nil {
		return err
	}
	var bases []string
	var reps []*exec.Cmd
	defer func() {
		for _, r := range reps {
			_ = r.Process.Kill()
			_ = r.Wait()
		}
	}()
	for i := range 2 {
		addr := fmt.Sprintf("127.0.0.1:%d", port())
		cmd := exec.Command(daemon, "registry", "serve", "--listen", addr, "--key-file", keyFile,
			"--store", "etcd", "--etcd-endpoints", strings.Join(c.Endpoints(), ","), "--log-level", "error")
		cmd.Stderr = os.Stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		started.Lock()
		err := cmd.Start()
		if err == nil {
			started.reps = append(started.reps, cmd)
		}
		started.Unlock()
		if err != nil {
			return err
		}
		reps = append(reps, cmd)
		bases = append(bases, "http://"+addr)
		_ = i
	}
	time.Sleep(time.Second)
	batches, err := takesBatches(bases[0], keyFile)
	if err != nil {
		return err
	}
	fmt.Printf("the registry takes the batch register and heartbeat: %v\n", batches)

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel() // before the wait: the registrants run until it
	var regs []*registrar.Registrar
	var clients []*timed
	start := func(name string, ins []registryclient.Instance) (*timed, context.CancelFunc, error) {
		cl, err := registryclient.New(strings.Join(bases, ","), keyFile)
		if err != nil {
			return nil, nil, err
		}
		t := &timed{cl: cl, last: map[string]time.Time{}}
		var reg registrar.Registry = t
		if batches {
			reg = batched{t}
		}
		r := registrar.New(registrar.Config{Registry: reg})
		r.Set(name, ins)
		rctx, rcancel := context.WithCancel(ctx)
		wg.Go(func() { r.Run(rctx) })
		regs = append(regs, r)
		clients = append(clients, t)
		return t, rcancel, nil
	}
	total := registrants * per
	for g := range registrants {
		ins := make([]registryclient.Instance, per)
		for i := range ins {
			ins[i] = registryclient.Instance{ID: fmt.Sprintf("g%03d-i%05d", g, i), Name: fmt.Sprintf("svc-%03d", g),
				Address: "10.0.0.1", Port: 1024 + i, Healthy: true, TTL: int64(ttl)}
		}
		if _, _, err := start(fmt.Sprintf("g%03d", g), ins); err != nil {
			return err
		}
	}
	var mins []registryclient.Instance
	for i := range mortal {
		mins = append(mins, registryclient.Instance{ID: fmt.Sprintf("mortal-%04d", i), Name: "mortal", Address: "10.0.0.2", Port: 1024 + i, Healthy: true, TTL: int64(ttl)})
	}
	mt, stopMortal, err := start("mortal", mins)
	if err != nil {
		return err
	}

	etcdc, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 5 * time.Second})
	if err != nil {
		return err
	}
	defer etcdc.Close()
	count := func() int64 {
		cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
		defer ccancel()
		resp, err := etcdc.Get(cctx, "/flyd/registry/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			return -1
		}
		return resp.Count
	}
	began := time.Now()
	regCommits0 := metric(c.Endpoints(), "etcd_server_proposals_committed_total")
	regTicks0, _ := cpuTicks(reps[0].Process.Pid)
	for n := count(); n < int64(total+mortal); n = count() {
		if time.Since(began) > 15*time.Minute {
			return fmt.Errorf("only %d of %d registered after 15 min", n, total+mortal)
		}
		if progress {
			fmt.Printf("  %s: %d registered\n", time.Since(began).Round(time.Second), n)
		}
		time.Sleep(time.Second)
	}
	regEl := time.Since(began)
	regTicks1, _ := cpuTicks(reps[0].Process.Pid)
	regCommits := (metric(c.Endpoints(), "etcd_server_proposals_committed_total") - regCommits0) / 3
	fmt.Printf("registered %d instances in %s: %.0f etcd commits (%.0f/s), replica A CPU %.0f%%\n", total+mortal, regEl.Round(time.Second),
		regCommits, regCommits/regEl.Seconds(), float64(regTicks1-regTicks0)/regEl.Seconds())

	// Steady state, after one TTL for the heartbeats to spread.
	time.Sleep(ttl / 2)
	procs := []proc{{"etcd m0", c.Pid(0)}, {"etcd m1", c.Pid(1)}, {"etcd m2", c.Pid(2)}, {"replica A", reps[0].Process.Pid}, {"replica B", reps[1].Process.Pid}, {"bench (registrants)", os.Getpid()}}
	ticks0 := make([]int64, len(procs))
	for i, p := range procs {
		ticks0[i], _ = cpuTicks(p.pid)
	}
	commits0 := metric(c.Endpoints(), "etcd_server_proposals_committed_total")
	fsync0 := metric(c.Endpoints(), "etcd_disk_wal_fsync_duration_seconds_count")
	beats0, wgone0 := uint64(0), 0
	for i, t := range clients {
		t.mu.Lock()
		t.lat = t.lat[:0]
		t.mu.Unlock()
		beats0 += regs[i].Stats().Heartbeats
		g, _ := t.counts()
		wgone0 += g
	}
	w0 := time.Now()
	time.Sleep(window)
	el := time.Since(w0).Seconds()
	commits := (metric(c.Endpoints(), "etcd_server_proposals_committed_total") - commits0) / 3 / el
	fsyncs := (metric(c.Endpoints(), "etcd_disk_wal_fsync_duration_seconds_count") - fsync0) / el
	var lat []time.Duration
	var beats uint64
	var wgone int
	for i, t := range clients {
		t.mu.Lock()
		lat = append(lat, t.lat...)
		t.mu.Unlock()
		beats += regs[i].Stats().Heartbeats
		g, _ := t.counts()
		wgone += g
	}
	slices.Sort(lat)
	q := func(p float64) time.Duration {
		if len(lat) == 0 {
			return 0
		}
		return lat[min(len(lat)-1, int(p*float64(len(lat))))]
	}
	fmt.Printf("steady state over %s: %d heartbeats (%.0f/s) in %d requests, p50 %s p99 %s, %d answered 410; etcd commits/s %.1f (per member), fsyncs/s %.1f (all members)\n",
		window, beats-beats0, float64(beats-beats0)/el, len(lat), q(0.50).Round(10*time.Microsecond), q(0.99).Round(10*time.Microsecond), wgone-wgone0, commits, fsyncs)
	for i, p := range procs {
		t1, _ := cpuTicks(p.pid)
		fmt.Printf("  %-20s CPU %5.1f%%  RSS %6d MiB\n", p.name, float64(t1-ticks0[i])/100/el*100, rssKiB(p.pid)/1024)
	}

	// Expiry: the mortals' heartbeats stop; each must be gone after its
	// TTL from its last acknowledged heartbeat, and not long after.
	stopMortal()
	time.Sleep(200 * time.Millisecond)
	mt.mu.Lock()
	last := maps(mt.last)
	mt.mu.Unlock()
	goneAt := map[string]time.Time{}
	for deadline := time.Now().Add(ttl + ttl/2 + 35*time.Second); len(goneAt) < mortal && time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		resp, err := etcdc.Get(ctx, "/flyd/registry/mortal-", clientv3.WithPrefix(), clientv3.WithKeysOnly())
		if err != nil {
			continue
		}
		live := map[string]bool{}
		for _, kv := range resp.Kvs {
			live[strings.TrimPrefix(string(kv.Key), "/flyd/registry/")] = true
		}
		for _, in := range mins {
			if _, ok := goneAt[in.ID]; !ok && !live[in.ID] {
				goneAt[in.ID] = time.Now()
			}
		}
	}
	var late []time.Duration
	early := 0
	for id, at := range goneAt {
		d := at.Sub(last[id])
		late = append(late, d-ttl)
		if d < ttl {
			early++
		}
	}
	slices.Sort(late)
	if len(late) > 0 {
		fmt.Printf("expiry: %d of %d gone; after TTL +%s (min) +%s (median) +%s (max); %d before their TTL\n",
			len(goneAt), mortal, late[0].Round(10*time.Millisecond), late[len(late)/2].Round(10*time.Millisecond), late[len(late)-1].Round(10*time.Millisecond), early)
	} else {
		fmt.Printf("expiry: none of %d gone within TTL+TTL/2+35s\n", mortal)
	}

	// One etcd member and one replica killed under the load: every live
	// instance must stay listed for more than a TTL.
	// A lost instance shows as a dip in the count, and as a heartbeat
	// answered 410 (then registered again).
	var gone0, regs0 int
	var failures0 uint64
	for i, t := range clients[:registrants] {
		t.mu.Lock()
		t.lat = t.lat[:0]
		t.mu.Unlock()
		g, r := t.counts()
		gone0, regs0, failures0 = gone0+g, regs0+r, failures0+regs[i].Stats().Failures
	}
	survivors := c.Endpoints()[1:]
	commits0 = metric(survivors, "etcd_server_proposals_committed_total")
	k0 := time.Now()
	c.Kill(0)
	_ = reps[0].Process.Kill()
	minCount, samples := int64(total), 0
	for end := time.Now().Add(ttl + ttl/2); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		if n := count(); n >= 0 {
			minCount = min(minCount, n)
			samples++
		}
	}
	kel := time.Since(k0).Seconds()
	kcommits := (metric(survivors, "etcd_server_proposals_committed_total") - commits0) / 2
	failing, gone, reregs := 0, 0, 0
	var failures uint64
	lat = lat[:0]
	for i, r := range regs[:registrants] {
		st := r.Stats()
		failing += st.Failing
		failures += st.Failures
		g, rr := clients[i].counts()
		gone, reregs = gone+g, reregs+rr
		clients[i].mu.Lock()
		lat = append(lat, clients[i].lat...)
		clients[i].mu.Unlock()
	}
	slices.Sort(lat)
	fmt.Printf("after killing etcd m0 and replica A: at least %d of %d live instances held over %d samples in %s; %d registrants' instances failing at the end\n",
		minCount, total, samples, ttl+ttl/2, failing)
	fmt.Printf("  meanwhile: %d heartbeat requests, p50 %s p99 %s; %d failed requests; %d heartbeats answered 410, %d instances registered again; etcd commits %.0f (%.1f/s)\n",
		len(lat), q(0.50).Round(10*time.Microsecond), q(0.99).Round(10*time.Microsecond), failures-failures0, gone-gone0, reregs-regs0, kcommits, kcommits/kel)
	return nil
}

// takesBatches asks the registry whether it knows both batch extensions:
// a batch register of one invalid instance (stored nowhere) and a batch
// heartbeat of an unknown id are answered 200 by one that does, 400 by one
// that does not. A registry that does not is measured with one request
// per instance, sent by the registrar's workers in parallel, as the
// contract's clients send them.
func takesBatches(base, keyFile string) (bool, error) {
	key, err := registryclient.ReadKey(keyFile)
	if err != nil {
		return false, err
	}
	both := true
	for path, body := range map[string]string{
		"/api/v1/services/register":  `{"instances":[{"name":"bench-probe"}]}`,
		"/api/v1/services/heartbeat": `{"ids":["bench-probe"]}`,
	} {
		req, err := http.NewRequest(http.MethodPost, base+path, strings.NewReader(body))
		if err != nil {
			return false, err
		}
		req.Header.Set("X-API-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, err
		}
		resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusOK:
		case http.StatusBadRequest:
			both = false
		default:
			return false, fmt.Errorf("probing %s: HTTP %d", path, resp.StatusCode)
		}
	}
	return both, nil
}

func maps(m map[string]time.Time) map[string]time.Time {
	out := make(map[string]time.Time, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
