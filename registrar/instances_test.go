package registrar

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/status"
)

// TestInstances: what the registry is given of a running workload: an
// instance an endpoint, named by registry.name or the workload, at the
// address this host reaches it on (the advertised one when exposed, the
// published port on loopback, its network's inner address), with the
// contract's labels; nothing of an endpoint outside this host.
func TestInstances(t *testing.T) {
	host := Host{Name: "h1", Advertise: "192.0.2.7", Inner: func(network string) string {
		if network == "ci-2" {
			return "10.89.0.2"
		}
		return ""
	}}
	w := &spec.Workload{Name: "api", Kind: spec.KindNative, Identity: &spec.Identity{Module: "shop", Service: "api-svc"},
		Registry: &spec.Registry{Name: "shop-api", Tags: []string{"tier=web"}, Metadata: map[string]string{"container": "api-1"}}}
	ports := []status.PortMapping{
		{Endpoint: "http", API: "http", Port: 18081, Network: spec.NetworkHost},
		{Endpoint: "pub", API: "http", Port: 8080, Published: 18443, Network: "ci-1",
			Instances: []status.Instance{{Access: "public", Address: "192.0.2.7:18443"}}},
		{Endpoint: "db", API: "tcp", Port: 5432, Published: 15432, Network: "ci-1"},
		{Endpoint: "cache", API: "tcp", Port: 6379, Network: "ci-2"},
		{Endpoint: "island", API: "tcp", Port: 7000, Network: "ci-3"},
		{Endpoint: "far", API: "tcp", Port: 443, Location: spec.LocationExternal},
	}
	ins := Instances(w, ports, true, host)
	got := make([]string, len(ins))
	for i, in := range ins {
		got[i] = in.ID + " " + in.Name + " " + in.Address + ":" + strconv.Itoa(in.Port) + " " + in.Metadata["container"] + "/" + in.Metadata["service"] + " " + strings.Join(in.Tags, ",")
	}
	want := []string{
		"flyd-h1-api-http shop-api 127.0.0.1:18081 api-1/api-svc api=http,tier=web",
		"flyd-h1-api-pub shop-api 192.0.2.7:18443 api-1/api-svc api=http,tier=web",
		"flyd-h1-api-db shop-api 127.0.0.1:15432 api-1/api-svc api=tcp,tier=web",
		"flyd-h1-api-cache shop-api 10.89.0.2:6379 api-1/api-svc api=tcp,tier=web",
		"flyd-h1-api-island shop-api 127.0.0.1:7000 api-1/api-svc api=tcp,tier=web",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("instances:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestThisHost: this host is named by its hostname, with the address and
// the inner addresses it is given.
func TestThisHost(t *testing.T) {
	want, _ := os.Hostname()
	h := ThisHost("192.0.2.7", func(network string) string { return "10.89.0.2" })
	if h.Name == "" || want != "" && h.Name != want || h.Advertise != "192.0.2.7" || h.Inner("ci") != "10.89.0.2" {
		t.Fatalf("this host: %+v", h)
	}
}
