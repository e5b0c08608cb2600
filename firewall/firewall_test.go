package firewall

import (
	"net/netip"
	"testing"

	"github.com/flyd-dev/flyd/internal/testenv"
)

// TestTableFollowsNetworks: the table holds the rules of the networks
// there are, and goes with the last of them.
func TestTableFollowsNetworks(t *testing.T) {
	testenv.RequireRoot(t, "rules are written into the kernel")
	table := TableFor(t.TempDir())
	f, err := New(table)
	if err != nil {
		testenv.Skip(t, err.Error())
	}
	t.Cleanup(func() { _ = Purge(table) })
	out := Net{Link: "fly-9990", Subnet: netip.MustParsePrefix("198.18.250.0/30"), Egress: true}
	island := Net{Link: "fly-9991", Subnet: netip.MustParsePrefix("198.18.250.4/30")}
	published := island
	published.Inner, published.Published = netip.MustParseAddr("198.18.250.6"), []Forward{{HostPort: 19000, Port: 80}}
	for _, tt := range []struct {
		change func() error
		rules  int // 0: no table
	}{
		// forward: replies, published ports, networks apart; postrouting:
		// out's masquerade.
		{func() error { return f.Set("out", out) }, 4},
		// and the island's forward refusal and its two input rules.
		{func() error { return f.Set("island", island) }, 7},
		// a published port: prerouting, output, and its masquerade.
		{func() error { return f.Set("island", published) }, 10},
		{func() error { return f.Remove("out") }, 9},
		{func() error { return f.Sync(map[string]Net{"out": out}) }, 4},
		{func() error { return f.Remove("out") }, 0},
	} {
		if err := tt.change(); err != nil {
			t.Fatal(err)
		}
		ok, n, err := Exists(table)
		if err != nil || ok != (tt.rules > 0) || n != tt.rules {
			t.Fatalf("table %s: exists %v with %d rules (%v), want %d rules", table, ok, n, err, tt.rules)
		}
	}
	if err := f.Set("bad", Net{Link: "eth0", Subnet: out.Subnet}); err == nil {
		t.Error("a link not named fly-… was accepted")
	}
}
