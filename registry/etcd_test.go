package registry

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/flyd-dev/flyd/internal/etcdtest"
	"github.com/flyd-dev/flyd/internal/testenv"
	"github.com/flyd-dev/flyd/registrar"
	"github.com/flyd-dev/flyd/registryclient"
)

// replica is one registry server over real HTTP on an etcd store.
type replica struct {
	base  string
	store *EtcdStore
	stop  func() error
}

// replicas starts n servers on the same etcd prefix: one registry.
func replicas(t *testing.T, endpoints []string, n int, mod ...func(*EtcdConfig)) []*replica {
	t.Helper()
	first := openEtcd(t, endpoints, mod...)
	out := make([]*replica, n)
	for i := range out {
		st := first
		if i > 0 {
			st = openEtcd(t, endpoints, append(mod, func(c *EtcdConfig) { c.Prefix = first.Prefix() })...)
		}
		s, err := New(Config{DefaultTTL: DefaultTTL, Key: testKey, Store: st})
		if err != nil {
			t.Fatal(err)
		}
		base, stop := serve(t, s)
		out[i] = &replica{base: base, store: st, stop: stop}
	}
	return out
}

// call sends a request with the test key and returns the status and body.
func call(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-API-Key", testKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// listed is the ids a replica lists.
func listed(t *testing.T, base string) []string {
	t.Helper()
	code, body := call(t, http.MethodGet, base+PathServices+"?detail=1", "")
	if code != http.StatusOK {
		t.Fatalf("list: HTTP %d %s", code, body)
	}
	var out struct{ Instances []Instance }
	if err := json.Unmarshal([]byte(body), &out); err != nil {
		t.Fatal(err)
	}
	ids := []string{}
	for _, in := range out.Instances {
		ids = append(ids, in.ID)
	}
	return ids
}

func within(t *testing.T, d time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Two replicas on one cluster are one registry: what one writes the other
// serves, byte for byte.
func TestEtcdReplicasShareState(t *testing.T) {
	r := replicas(t, sharedEtcd(t).Endpoints(), 2)
	a, b := r[0].base, r[1].base
	if code, body := call(t, http.MethodPost, a+PathRegister, `{"id":"w","name":"web","address":"h","port":80}`); code != http.StatusOK || !strings.Contains(body, `"created":true`) {
		t.Fatalf("register on A: HTTP %d %s", code, body)
	}
	if code, body := call(t, http.MethodPost, b+PathRegister, `{"id":"w","name":"web","address":"h","port":80}`); code != http.StatusOK || !strings.Contains(body, `"created":false`) {
		t.Fatalf("the same registration on B: HTTP %d %s; want an upsert", code, body)
	}
	if code, body := call(t, http.MethodPost, b+PathHeartbeat, `{"id":"w"}`); code != http.StatusOK {
		t.Fatalf("heartbeat on B: HTTP %d %s", code, body)
	}
	// updated_at aside: a heartbeat that moved nothing is known to the
	// replica that took it (B) only; A lists the last write's time.
	stamp := regexp.MustCompile(`"updated_at":"[^"]*"`)
	for _, path := range []string{PathServices, PathServices + "?detail=1", PathServices + "?detail=1&healthy_only=1", PathExport} {
		_, fromA := call(t, http.MethodGet, a+path, "")
		_, fromB := call(t, http.MethodGet, b+path, "")
		fromA, fromB = stamp.ReplaceAllString(fromA, ""), stamp.ReplaceAllString(fromB, "")
		if fromA != fromB || !strings.Contains(fromA, "web") {
			t.Fatalf("GET %s differs between replicas:\nA %s\nB %s", path, fromA, fromB)
		}
	}
	if code, body := call(t, http.MethodPost, b+PathDeregister, `{"id":"w"}`); code != http.StatusOK {
		t.Fatalf("deregister on B: HTTP %d %s", code, body)
	}
	if code, _ := call(t, http.MethodPost, a+PathDeregister, `{"id":"w"}`); code != http.StatusNotFound {
		t.Fatalf("deregister on A after B: HTTP %d; want 404", code)
	}
	if code, _ := call(t, http.MethodPost, a+PathHeartbeat, `{"id":"w"}`); code != http.StatusGone {
		t.Fatalf("heartbeat on A after B deregistered: HTTP %d; want 410", code)
	}
}

// The lease is etcd's: it expires on etcd's clock, between a register and
// a heartbeat that comes too late (410), and a replica whose clock is an
// hour off keeps a lease alive as well as any.
func TestEtcdLeaseTimeIsEtcds(t *testing.T) {
	t.Parallel()
	ep := sharedEtcd(t).Endpoints()
	st := openEtcd(t, ep)
	skewed := openEtcd(t, ep, func(c *EtcdConfig) { c.Prefix = st.Prefix() })
	a, err := New(Config{DefaultTTL: DefaultTTL, Key: testKey, Store: st})
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(Config{DefaultTTL: DefaultTTL, Key: testKey, Store: skewed,
		Now: func() time.Time { return time.Now().Add(-time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	baseA, _ := serve(t, a)
	baseB, _ := serve(t, b)

	// 1 s lease, heart-beaten through the skewed replica for three: with
	// the replica's clock deciding, it would have expired an hour ago.
	call(t, http.MethodPost, baseA+PathRegister, `{"id":"kept","name":"s","address":"h","port":1,"ttl_ns":1000000000}`)
	for range 6 {
		time.Sleep(500 * time.Millisecond)
		if code, body := call(t, http.MethodPost, baseB+PathHeartbeat, `{"id":"kept"}`); code != http.StatusOK {
			t.Fatalf("heartbeat through the skewed replica: HTTP %d %s", code, body)
		}
		if !slices.Contains(listed(t, baseA), "kept") {
			t.Fatal("a heart-beaten instance went missing")
		}
	}

	// Registered, then no heartbeat: gone when etcd's lease runs out.
	start := time.Now()
	call(t, http.MethodPost, baseA+PathRegister, `{"id":"late","name":"s","address":"h","port":2,"ttl_ns":1000000000}`)
	within(t, 5*time.Second, "the lease expiring", func() bool { return !slices.Contains(listed(t, baseB), "late") })
	if e := time.Since(start); e < time.Second {
		t.Fatalf("a 1 s lease expired after %s", e)
	}
	if code, body := call(t, http.MethodPost, baseB+PathHeartbeat, `{"id":"late"}`); code != http.StatusGone || !strings.Contains(body, "register again") {
		t.Fatalf("heartbeat after the lease expired: HTTP %d %s; want 410", code, body)
	}
}

// A static entry (TTL 0) has no lease; moving between a lease and none
// takes effect at the next registration.
func TestEtcdStaticEntry(t *testing.T) {
	st := openEtcd(t, sharedEtcd(t).Endpoints())
	h := &harness{t: t, clk: newClock(), etcd: st}
	s, err := New(Config{DefaultTTL: 0, Key: testKey, Store: st, Now: h.clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	h.s = s
	lease := func() int64 {
		resp, err := st.cli.Get(context.Background(), st.key("i"))
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("key of i: %v", err)
		}
		return resp.Kvs[0].Lease
	}
	h.register(`{"id":"i","name":"s","address":"h","port":1}`)
	if l := lease(); l != 0 || h.instances("")[0].TTL != 0 {
		t.Fatalf("a static entry on lease %d", l)
	}
	if c := h.heartbeat("i"); c != http.StatusOK {
		t.Fatalf("heartbeat of a static entry: HTTP %d", c)
	}
	h.register(`{"id":"i","name":"s","address":"h","port":1,"ttl_ns":60000000000}`)
	first := lease()
	// The replica's shared lease of 60 s TTLs, with its margin.
	resp, err := st.cli.TimeToLive(context.Background(), clientv3.LeaseID(first))
	if want := int64(60 + leaseMargin/time.Second); err != nil || first == 0 || resp.GrantedTTL != want {
		t.Fatalf("lease %d granted %+v (%v); want %d s", first, resp, err, want)
	}
	h.register(`{"id":"i","name":"s","address":"h","port":1}`)
	if lease() != 0 {
		t.Fatal("back to static, the key kept its lease")
	}
	// The shared lease it left is not revoked: others may be on it.
	if resp, err := st.cli.TimeToLive(context.Background(), clientv3.LeaseID(first)); err != nil || resp.TTL <= 0 {
		t.Fatalf("the shared lease: %+v %v; want it alive", resp, err)
	}
}

// Keys under the prefix that this registry did not write are not listed,
// not overwritten and not deleted.
func TestEtcdForeignKeys(t *testing.T) {
	st := openEtcd(t, sharedEtcd(t).Endpoints())
	h := &harness{t: t, clk: newClock(), etcd: st}
	s, err := New(Config{DefaultTTL: DefaultTTL, Key: testKey, Store: st, Now: h.clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	h.s = s
	ctx := context.Background()
	other := `{"format":"flyd.registry/v1","instance":{"id":"elsewhere","name":"x","address":"h","port":1}}`
	foreign := map[string]string{
		"plain":            "hello",
		"json":             `{"name":"web","address":"h","port":1}`,
		"wrong-format":     `{"format":"v9","instance":{"id":"wrong-format","name":"x","address":"h","port":1}}`,
		"id-mismatch":      other,
		"nested/deeper/id": "{}",
	}
	for k, v := range foreign {
		if _, err := st.cli.Put(ctx, st.key(k), v); err != nil {
			t.Fatal(err)
		}
	}
	h.register(`{"id":"ours","name":"web","address":"h","port":1}`)
	if got := h.ids(""); !slices.Equal(got, []string{"ours"}) {
		t.Fatalf("listed %v; want only ours", got)
	}
	if exp := h.must(http.StatusOK, http.MethodGet, PathExport, "").Body.String(); strings.Count(exp, "\n[[service]]\n") != 1 {
		t.Fatalf("export holds foreign keys:\n%s", exp)
	}
	w := h.req(http.MethodPost, PathRegister, `{"id":"plain","name":"web","address":"h","port":1}`)
	if w.Code != http.StatusConflict || !strings.Contains(errorMessage(t, w), "did not write") {
		t.Fatalf("register over a foreign key: HTTP %d %s; want 409", w.Code, w.Body)
	}
	if c := h.heartbeat("json"); c != http.StatusGone {
		t.Fatalf("heartbeat of a foreign key: HTTP %d; want 410", c)
	}
	if w := h.req(http.MethodPost, PathDeregister, `{"id":"wrong-format"}`); w.Code != http.StatusNotFound {
		t.Fatalf("deregister of a foreign key: HTTP %d; want 404", w.Code)
	}
	for k, v := range foreign {
		resp, err := st.cli.Get(ctx, st.key(k))
		if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != v {
			t.Fatalf("foreign key %q changed or gone: %v %v", k, resp, err)
		}
	}
}

// An etcd that does not answer at start is refused with a clear error.
func TestOpenEtcdRefusesUnreachable(t *testing.T) {
	etcdtest.Binary(t) // the same CI rule as the other etcd tests
	dead := fmt.Sprintf("http://127.0.0.1:%d", testenv.FreePort(t))
	_, err := OpenEtcd(context.Background(), EtcdConfig{Endpoints: []string{dead}, Timeout: 300 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "does not answer") || !strings.Contains(err.Error(), dead) {
		t.Fatalf("OpenEtcd on a dead endpoint: %v", err)
	}
	for _, bad := range []EtcdConfig{{}, {Endpoints: []string{"127.0.0.1:2379"}}, {Endpoints: []string{dead}, Prefix: "x"}} {
		if _, err := OpenEtcd(context.Background(), bad); err == nil {
			t.Fatalf("OpenEtcd(%+v) accepted", bad)
		}
	}
	if _, err := New(Config{Key: testKey, Store: newMemStore(time.Now), SnapshotPath: filepath.Join(t.TempDir(), "s")}); err == nil {
		t.Fatal("a snapshot with an external store was accepted")
	}
}

// fleet is registrar-driven registrants heart-beating n instances into the
// registry through a client of every replica.
type fleet struct {
	r    *registrar.Registrar
	ids  []string
	stop func()
}

func startFleet(t *testing.T, bases []string, n int, ttl time.Duration) *fleet {
	t.Helper()
	keyFile := filepath.Join(t.TempDir(), "registry.key")
	if err := os.WriteFile(keyFile, []byte(testKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := registryclient.New(strings.Join(bases, ","), keyFile, registryclient.WithTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	f := &fleet{r: registrar.New(registrar.Config{Registry: c, RequestTimeout: 3 * time.Second})}
	ins := make([]registryclient.Instance, n)
	for i := range ins {
		ins[i] = registryclient.Instance{ID: fmt.Sprintf("i%03d", i), Name: "svc", Address: "10.0.0.1", Port: 1000 + i, Healthy: true, TTL: int64(ttl)}
		f.ids = append(f.ids, ins[i].ID)
	}
	f.r.Set("w", ins)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); f.r.Run(ctx) }()
	f.stop = func() { cancel(); <-done; c.Close() }
	t.Cleanup(f.stop)
	return f
}

// allListed tells whether base lists every instance of the fleet.
func (f *fleet) allListed(t *testing.T, base string) bool {
	got := listed(t, base)
	return len(got) == len(f.ids) && slices.Equal(got, f.ids)
}

// Killing one member of three and one of two replicas while 200 instances
// heart-beat loses none, and the survivors answer throughout.
func TestEtcdMemberAndReplicaLoss(t *testing.T) {
	t.Parallel()
	c := etcdtest.New(t, 3)
	r := replicas(t, c.Endpoints(), 2)
	// 5 s leases: 200 instances are then 120 heartbeats/s, well within
	// what the loopback cluster commits with the rest of the suite running
	// beside it (see BENCHMARKS.md); a 2 s lease overloaded it.
	const ttl = 5 * time.Second
	f := startFleet(t, []string{r[0].base, r[1].base}, 200, ttl)
	within(t, 20*time.Second, "200 instances registered", func() bool { return f.allListed(t, r[1].base) })

	c.Kill(0)
	if err := r[0].stop(); err != nil {
		t.Fatalf("stopping replica A: %v", err)
	}
	// Longer than a lease: an instance that missed its heartbeats would be
	// gone by the end, and every listing on the way must hold them all.
	for end := time.Now().Add(ttl + 3*time.Second); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
		if got := listed(t, r[1].base); len(got) != 200 {
			t.Fatalf("with a member and a replica down, %d of 200 instances listed", len(got))
		}
	}
	if st := f.r.Stats(); st.Registered != 200 || st.Failing != 0 {
		t.Fatalf("registrar after the losses: %+v", st)
	}
}

// Without quorum the registry answers 503 saying so; when quorum returns,
// the registrants are back within one heartbeat period, and instances
// whose lease did lapse are registered again on their 410.
func TestEtcdQuorumLoss(t *testing.T) {
	t.Parallel()
	c := etcdtest.New(t, 3)
	r := replicas(t, c.Endpoints(), 1, func(c *EtcdConfig) { c.Timeout = 500 * time.Millisecond })
	base := r[0].base
	const ttl = 30 * time.Second // the registrar heart-beats every ttl/3
	f := startFleet(t, []string{base}, 50, ttl)
	within(t, 20*time.Second, "50 instances registered", func() bool { return f.allListed(t, base) })

	c.Kill(1)
	c.Kill(2)
	for _, rq := range []struct{ method, path, body string }{
		{http.MethodPost, PathRegister, `{"name":"new","address":"h","port":1}`},
		{http.MethodPost, PathHeartbeat, `{"id":"i000"}`},
		{http.MethodPost, PathDeregister, `{"id":"i001"}`},
		{http.MethodGet, PathServices, ""},
		{http.MethodGet, PathExport, ""},
	} {
		start := time.Now()
		code, body := call(t, rq.method, base+rq.path, rq.body)
		if code != http.StatusServiceUnavailable || !strings.Contains(body, "no quorum or cannot be reached") {
			t.Fatalf("%s %s without quorum: HTTP %d %s; want a 503 saying why", rq.method, rq.path, code, body)
		}
		if e := time.Since(start); e > 3*time.Second {
			t.Fatalf("%s %s took %s to answer 503", rq.method, rq.path, e)
		}
	}

	for _, i := range []int{1, 2} {
		if err := c.Restart(i); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.WaitHealthy(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	// Leases that lapsed during the outage, as they would have in a longer
	// one: these registrants get 410 and must register again.
	for _, id := range f.ids[:10] {
		resp, err := r[0].store.cli.Get(context.Background(), r[0].store.key(id))
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("reading %s after recovery: %v", id, err)
		}
		if _, err := r[0].store.cli.Delete(context.Background(), r[0].store.key(id)); err != nil {
			t.Fatal(err)
		}
	}
	// One heartbeat period, jitter included (see registrar's period).
	within(t, ttl/3+ttl/30+time.Second, "every instance registered and no registrant failing", func() bool {
		st := f.r.Stats()
		return st.Failing == 0 && st.Registered == 50 && f.allListed(t, base)
	})
	t.Logf("registrants recovered %s after quorum returned", time.Since(back).Round(time.Millisecond))
}
