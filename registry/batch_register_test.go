package registry

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// The batch register answers per instance what a register of that
// instance alone would have, in order, on either store: a repeated id is
// registered again (not created twice), an invalid instance is refused
// alone.
func TestBatchRegister(t *testing.T) {
	eachStore(t, func(t *testing.T, st storeKind) {
		h := newHarnessOn(t, st)
		h.register(`{"id":"old","name":"s","address":"h","port":9}`)
		h.clk.Add(10 * time.Second)
		w := h.must(http.StatusOK, http.MethodPost, PathRegister, `{"instances":[
			{"id":"a","name":"s","address":"h","port":1},
			{"id":"bad","name":"s","address":"h"},
			{"name":"s","address":"h","port":2},
			{"id":"a","name":"s","address":"h","port":3},
			{"id":"old","name":"s","address":"h","port":9,"ttl_ns":5000000000}]}`)
		var out struct {
			Results []registerResult `json:"results"`
		}
		decodeBody(t, w, &out)
		var got []string
		for _, r := range out.Results {
			got = append(got, fmt.Sprintf("%s:%d:%v", r.ID, r.Status, r.Created))
			if (r.Status == http.StatusOK) != (r.Error == "") {
				t.Fatalf("%s: status %d, error %q", r.ID, r.Status, r.Error)
			}
		}
		want := []string{"a:200:true", "bad:400:false", "s-h-2:200:true", "a:200:false", "old:200:false"}
		if !slices.Equal(got, want) {
			t.Fatalf("results %v; want %v", got, want)
		}
		byID := map[string]Instance{}
		for _, in := range h.instances("") {
			byID[in.ID] = in
		}
		if len(byID) != 3 || byID["a"].Port != 3 || byID["old"].TTL != int64(5*time.Second) {
			t.Fatalf("listed %+v", byID)
		}
		if in := byID["old"]; !in.RegisteredAt.Equal(t0) || !in.UpdatedAt.Equal(t0.Add(10*time.Second)) {
			t.Fatalf("refreshed instance stamped registered_at %v updated_at %v", in.RegisteredAt, in.UpdatedAt)
		}
		for _, bad := range []string{`{"instances":[]}`, `{"instances":{}}`,
			`{"id":"a","instances":[{"name":"s","address":"h","port":1}]}`,
			`{"instances":[` + strings.Repeat(`{"name":"s","address":"h","port":1},`, MaxBatch) + `{"name":"s","address":"h","port":1}]}`} {
			if w := h.req(http.MethodPost, PathRegister, bad); w.Code != http.StatusBadRequest {
				t.Fatalf("%.60s: HTTP %d; want 400", bad, w.Code)
			}
		}
	})
}

// revision is the etcd cluster's revision: it moves by one per write
// transaction, whatever it writes.
func revision(t *testing.T, st *EtcdStore) int64 {
	t.Helper()
	resp, err := st.cli.Get(context.Background(), st.Prefix(), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	return resp.Header.Revision
}

// batchBody is a batch register of n instances named prefix0...
func batchBody(prefix string, n int, extra string) string {
	var b strings.Builder
	b.WriteString(`{"instances":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":"%s%d","name":"s","address":"h","port":%d%s}`, prefix, i, i+1, extra)
	}
	b.WriteString(`]}`)
	return b.String()
}

// On etcd a batch register writes a batch of instances in one transaction
// (one raft commit), all on the replica's one shared lease.
func TestEtcdBatchRegisterOneWriteABatch(t *testing.T) {
	h := newHarnessOn(t, etcd)
	before := revision(t, h.etcd)
	h.must(http.StatusOK, http.MethodPost, PathRegister, batchBody("i", 250, ""))
	if d := revision(t, h.etcd) - before; d != 3 {
		t.Fatalf("250 instances registered in %d writes; want 3 (batches of %d)", d, batchReads)
	}
	resp, err := h.etcd.cli.Get(context.Background(), h.etcd.Prefix(), withPrefix())
	if err != nil {
		t.Fatal(err)
	}
	leases := map[int64]bool{}
	for _, kv := range resp.Kvs {
		leases[kv.Lease] = true
	}
	if len(resp.Kvs) != 250 || len(leases) != 1 {
		t.Fatalf("%d keys on %d leases; want 250 on one", len(resp.Kvs), len(leases))
	}
	// Registered again: no new lease, one write a batch again.
	before = revision(t, h.etcd)
	h.must(http.StatusOK, http.MethodPost, PathRegister, batchBody("i", 100, ""))
	if d := revision(t, h.etcd) - before; d != 1 {
		t.Fatalf("100 instances registered again in %d writes; want 1", d)
	}
}

// The instances of a replica that died move onto the lease of the one
// their heartbeats reach next, a batch in one write.
func TestEtcdBatchHeartbeatMovesInOneWrite(t *testing.T) {
	r := replicas(t, sharedEtcd(t).Endpoints(), 2)
	if code, body := call(t, http.MethodPost, r[0].base+PathRegister, batchBody("m", 100, "")); code != http.StatusOK {
		t.Fatalf("register: HTTP %d %s", code, body)
	}
	ids := make([]string, 100)
	for i := range ids {
		ids[i] = fmt.Sprintf("m%d", i)
	}
	body, _ := json.Marshal(map[string][]string{"ids": ids})
	before := revision(t, r[1].store)
	if code, _ := call(t, http.MethodPost, r[1].base+PathHeartbeat, string(body)); code != http.StatusOK {
		t.Fatalf("heartbeat on B: HTTP %d", code)
	}
	if d := revision(t, r[1].store) - before; d != 1 {
		t.Fatalf("100 instances moved to B in %d writes; want 1", d)
	}
	// Now on B's lease: B's next heartbeat writes nothing.
	before = revision(t, r[1].store)
	if code, _ := call(t, http.MethodPost, r[1].base+PathHeartbeat, string(body)); code != http.StatusOK {
		t.Fatalf("heartbeat on B: HTTP %d", code)
	}
	if d := revision(t, r[1].store) - before; d != 0 {
		t.Fatalf("a second heartbeat on B wrote %d times", d)
	}
}

// Instances that stop beating together leave the shared lease together:
// a few writes for 150 of them, not one each, and each still expires
// after its TTL, never before.
func TestEtcdIdleInstancesMoveOffInBatches(t *testing.T) {
	t.Parallel()
	st := openEtcd(t, sharedEtcd(t).Endpoints())
	s, err := New(Config{DefaultTTL: DefaultTTL, Key: testKey, Store: st})
	if err != nil {
		t.Fatal(err)
	}
	base, _ := serve(t, s)
	const ttl = 3 * time.Second
	if code, body := call(t, http.MethodPost, base+PathRegister, batchBody("idle", 150, `,"ttl_ns":3000000000`)); code != http.StatusOK {
		t.Fatalf("register: HTTP %d %s", code, body)
	}
	start, before := time.Now(), revision(t, st)
	for time.Since(start) < ttl-200*time.Millisecond {
		if n := len(listed(t, base)); n != 150 {
			t.Fatalf("%d of 150 listed %s after the register, before their TTL", n, time.Since(start))
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Moved off by now (idle after half the TTL), in batches.
	d := revision(t, st) - before
	if d < 2 || d > 6 {
		t.Fatalf("150 idle instances moved off the shared lease in %d writes; want 2 to 6", d)
	}
	t.Logf("150 idle instances moved off the shared lease in %d writes", d)
	within(t, ttl, "the idle instances to expire", func() bool { return len(listed(t, base)) == 0 })
}
