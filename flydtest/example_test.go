package flydtest_test

import (
	"net/http"
	"testing"

	"github.com/flyd-dev/flyd/flydtest"
	"github.com/flyd-dev/flyd/spec"
)

// A test with a stack of its own: a cache from documents built in Go,
// reached from the test at its published port and from a command run
// inside the project's network.
func ExampleStart() {
	testCache := func(t *testing.T) {
		t.Parallel()
		p := flydtest.Start(t, flydtest.Docs(
			&spec.Network{Kind: spec.KindNetwork, Name: "net"},
			&spec.Workload{Name: "cache", Network: "net", Identity: &spec.Identity{Module: "store", Service: "cache"},
				Command:   []string{"redis-server", "--port", "6379", "--protected-mode", "no"},
				Endpoints: []spec.Endpoint{{Name: "tcp", Port: spec.FixedPort(6379), Publish: spec.Port{Mode: spec.PortEphemeral}}},
				Health:    &spec.Health{TCP: "tcp"}},
		))
		addr := p.Addr("store/cache/tcp") // host:port, from the test's side
		out, code, err := p.Run("redis-cli", "-h", "localhost", "ping")
		if err != nil || code != 0 {
			t.Fatalf("%s: exit %d, %v", out, code, err)
		}
		_ = addr
	}
	testShop := func(t *testing.T) {
		p := flydtest.Start(t, flydtest.Dir("testdata/shop"), flydtest.KeepOnFailure())
		resp, err := http.Get(p.URL("shop/api/http") + "/health")
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("health: %v %v\n%s", resp, err, p.Logs("api"))
		}
	}
	_, _ = testCache, testShop
}

// ProjectName is what a test's project is called: its name as a DNS
// label, and a random suffix.
func ExampleProjectName() {
	_ = flydtest.ProjectName("TestCheckout/with_coupon") // "testcheckout-with-coupon-" and 6 hex digits
}
