package registry

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// The batch heartbeat answers per id what a heartbeat of that id alone
// would have, on either store.
func TestBatchHeartbeat(t *testing.T) {
	eachStore(t, func(t *testing.T, st storeKind) {
		h := newHarnessOn(t, st)
		h.register(`{"id":"a","name":"s","address":"h","port":1}`)
		h.register(`{"id":"b","name":"s","address":"h","port":2}`)
		h.clk.Add(10 * time.Second)
		w := h.must(http.StatusOK, http.MethodPost, PathHeartbeat, `{"ids":["a","nobody","b"]}`)
		var out struct {
			Results []beatResult `json:"results"`
		}
		decodeBody(t, w, &out)
		var got []string
		for _, r := range out.Results {
			got = append(got, r.ID+":"+http.StatusText(r.Status))
			if r.Status == http.StatusOK && !r.UpdatedAt.Equal(t0.Add(10*time.Second)) {
				t.Fatalf("%s: updated_at %v", r.ID, r.UpdatedAt)
			}
			if r.Status == http.StatusGone && !strings.Contains(r.Error, "register again") {
				t.Fatalf("%s: error %q", r.ID, r.Error)
			}
		}
		if want := []string{"a:OK", "nobody:Gone", "b:OK"}; !slices.Equal(got, want) {
			t.Fatalf("results %v; want %v", got, want)
		}
		for _, in := range h.instances("") {
			if !in.UpdatedAt.Equal(t0.Add(10 * time.Second)) {
				t.Fatalf("%s listed with updated_at %v", in.ID, in.UpdatedAt)
			}
		}
		for _, bad := range []string{`{"ids":[]}`, `{"ids":[""]}`, `{"id":"a","ids":["a"]}`, `{"ids":"a"}`,
			`{"ids":[` + strings.Repeat(`"x",`, MaxBatch) + `"x"]}`} {
			if w := h.req(http.MethodPost, PathHeartbeat, bad); w.Code != http.StatusBadRequest {
				t.Fatalf("%.40s: HTTP %d; want 400", bad, w.Code)
			}
		}
	})
}

// On etcd a heartbeat of an instance on the replica's shared lease writes
// nothing (the cluster's revision stays), however many instances there
// are, and all of them share one lease.
func TestEtcdHeartbeatWritesNothing(t *testing.T) {
	h := newHarnessOn(t, etcd)
	ids := make([]string, 50)
	for i := range ids {
		ids[i] = "i" + string(rune('a'+i/26)) + string(rune('a'+i%26))
		h.register(`{"id":"` + ids[i] + `","name":"s","address":"h","port":1}`)
	}
	ctx := context.Background()
	resp, err := h.etcd.cli.Get(ctx, h.etcd.Prefix(), withPrefix())
	if err != nil {
		t.Fatal(err)
	}
	leases := map[int64]bool{}
	for _, kv := range resp.Kvs {
		leases[kv.Lease] = true
	}
	if len(leases) != 1 {
		t.Fatalf("%d instances on %d leases; want one shared lease", len(resp.Kvs), len(leases))
	}
	before := resp.Header.Revision
	body, _ := json.Marshal(map[string][]string{"ids": ids})
	h.must(http.StatusOK, http.MethodPost, PathHeartbeat, string(body))
	for _, id := range ids[:5] {
		if c := h.heartbeat(id); c != http.StatusOK {
			t.Fatalf("heartbeat %s: HTTP %d", id, c)
		}
	}
	resp, err = h.etcd.cli.Get(ctx, h.etcd.Prefix(), withPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if resp.Header.Revision != before {
		t.Fatalf("heartbeats moved the revision from %d to %d: they wrote", before, resp.Header.Revision)
	}
}

// Instances on one shared lease expire each on its own: one that stops
// beating is gone after its TTL, never before, while its neighbour that
// keeps beating stays.
func TestEtcdSharedLeaseExpiresEachOnItsOwn(t *testing.T) {
	t.Parallel()
	st := openEtcd(t, sharedEtcd(t).Endpoints())
	s, err := New(Config{DefaultTTL: DefaultTTL, Key: testKey, Store: st})
	if err != nil {
		t.Fatal(err)
	}
	base, _ := serve(t, s)
	const ttl = 3 * time.Second
	for _, id := range []string{"beats", "stops"} {
		if code, body := call(t, http.MethodPost, base+PathRegister, `{"id":"`+id+`","name":"s","address":"h","port":1,"ttl_ns":3000000000}`); code != http.StatusOK {
			t.Fatalf("register %s: HTTP %d %s", id, code, body)
		}
	}
	start := time.Now()
	for time.Since(start) < ttl+ttl/2+2*time.Second {
		if code, _ := call(t, http.MethodPost, base+PathHeartbeat, `{"ids":["beats"]}`); code != http.StatusOK {
			t.Fatalf("heartbeat: HTTP %d", code)
		}
		got := listed(t, base)
		if !slices.Contains(got, "beats") {
			t.Fatal("the instance that beats went missing")
		}
		if e := time.Since(start); !slices.Contains(got, "stops") && e < ttl {
			t.Fatalf("the idle instance was gone after %s, before its TTL", e)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// Its own lease: the TTL rounded up, plus etcd's expiry tick.
	if slices.Contains(listed(t, base), "stops") {
		t.Fatalf("the idle instance is still listed %s after its last heartbeat", time.Since(start))
	}
	if code, _ := call(t, http.MethodPost, base+PathHeartbeat, `{"id":"stops"}`); code != http.StatusGone {
		t.Fatalf("heartbeat of the expired instance: HTTP %d; want 410", code)
	}
}

// An instance heart-beaten through another replica moves onto that
// replica's lease (one write), and back.
func TestEtcdHeartbeatMovesBetweenReplicas(t *testing.T) {
	r := replicas(t, sharedEtcd(t).Endpoints(), 2)
	call(t, http.MethodPost, r[0].base+PathRegister, `{"id":"m","name":"s","address":"h","port":1}`)
	lease := func() int64 {
		resp, err := r[0].store.cli.Get(context.Background(), r[0].store.key("m"))
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("key of m: %v", err)
		}
		return resp.Kvs[0].Lease
	}
	onA := lease()
	if code, _ := call(t, http.MethodPost, r[1].base+PathHeartbeat, `{"id":"m"}`); code != http.StatusOK {
		t.Fatalf("heartbeat on B: HTTP %d", code)
	}
	onB := lease()
	if onB == onA || onB == 0 {
		t.Fatalf("after a heartbeat on B the key is on lease %d (A's %d)", onB, onA)
	}
	if code, _ := call(t, http.MethodPost, r[0].base+PathHeartbeat, `{"ids":["m"]}`); code != http.StatusOK {
		t.Fatalf("heartbeat on A: HTTP %d", code)
	}
	if lease() != onA {
		t.Fatal("a heartbeat on A did not bring the key back to A's lease")
	}
}

func withPrefix() clientv3.OpOption { return clientv3.WithPrefix() }
