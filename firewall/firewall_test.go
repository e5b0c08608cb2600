package firewall

import (
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/userdata"

	"github.com/flyd-dev/flyd/internal/instance"
	"github.com/flyd-dev/flyd/internal/testenv"
)

// testFirewall is a firewall of a table of the test's own, purged when
// the test ends.
func testFirewall(t testing.TB) (*Firewall, string) {
	t.Helper()
	testenv.RequireRoot(t, "rules are written into the kernel")
	table := instance.Name(t.TempDir())
	f, err := New(table)
	if err != nil {
		testenv.Skip(t, err.Error())
	}
	t.Cleanup(func() { _ = Purge(table) })
	return f, table
}

// TestTableFollowsNetworks: the table holds the rules of the networks
// there are, and goes with the last of them.
func TestTableFollowsNetworks(t *testing.T) {
	f, table := testFirewall(t)
	out := Net{Link: "fly-9990", Subnet: netip.MustParsePrefix("198.18.250.0/30"), Egress: true}
	island := Net{Link: "fly-9991", Subnet: netip.MustParsePrefix("198.18.250.4/30")}
	published := island
	published.Inner, published.Published = netip.MustParseAddr("198.18.250.6"), []Forward{{HostPort: 19000, Port: 80, Exposed: true}}
	balanced := published
	balanced.Published = []Forward{{HostPort: 19000, Balance: []int{8001, 8002, 8003}}}
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
		// balanced across replicas: the same rules, each with its map.
		{func() error { return f.Set("island", balanced) }, 10},
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
		// IPv6 from and to the links: input's replies, neighbour
		// discovery and refusal; forward's two refusals.
		if want6 := map[bool]int{true: 5}[tt.rules > 0]; rules6(t, table) != want6 {
			t.Fatalf("ip6 table %s: %d rules, want %d", table, rules6(t, table), want6)
		}
	}
	if err := f.Set("bad", Net{Link: "eth0", Subnet: out.Subnet}); err == nil {
		t.Error("a link not named fly-… was accepted")
	}
}

// TestGuardsAreWrittenAndRemoved: each allow of each policy becomes a rule
// carrying its policy's name, a guarded direction ends in a refusal, and
// no guard leaves no guard chain.
func TestGuardsAreWrittenAndRemoved(t *testing.T) {
	f, table := testFirewall(t)
	if err := f.Set("db", Net{Link: "fly-9992", Subnet: netip.MustParsePrefix("198.18.250.8/30")}); err != nil {
		t.Fatal(err)
	}
	in := []Allow{{Policy: "from-web", Links: []string{"fly-9993"}, Ports: []Port{{Proto: 6, Port: 5432}, {Proto: 1}}},
		{Policy: "from-lab", CIDRs: []netip.Prefix{netip.MustParsePrefix("198.18.0.0/15")}}}
	out := []Allow{}
	if err := f.SetProjection(Projection{Guards: []Guard{{Link: "fly-9992", Ingress: &in, Egress: &out}}}); err != nil {
		t.Fatal(err)
	}
	got := guardRules(t, table)
	want := map[string][]string{
		// replies; web's two ports; the lab's range; the refusal.
		"guard-ingress":     {"", "policy from-web", "policy from-web", "policy from-lab", "policies guard the ingress of fly-9992"},
		"guard-egress":      {"", "policies guard the egress of fly-9992"},
		"guard-egress-host": {"", "policies guard the egress of fly-9992"},
	}
	for ch, comments := range want {
		if !slices.Equal(got[ch], comments) {
			t.Errorf("chain %s holds %q, want %q", ch, got[ch], comments)
		}
	}
	if err := f.SetProjection(Projection{}); err != nil {
		t.Fatal(err)
	}
	if got := guardRules(t, table); len(got) != 0 {
		t.Errorf("no guard left chains %v", got)
	}
	if err := f.SetProjection(Projection{Guards: []Guard{{Link: "eth0", Egress: &out}}}); err == nil {
		t.Error("a guard of a link not named fly-… was accepted")
	}
}

// guardRules reads back the comments of the rules of table's guard
// chains, by chain.
func guardRules(t *testing.T, table string) map[string][]string {
	t.Helper()
	c, err := nftables.New()
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseLasting()
	chains, err := c.ListChainsOfTableFamily(nftables.TableFamilyIPv4)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, ch := range chains {
		if ch.Table.Name != table || !strings.HasPrefix(ch.Name, "guard-") {
			continue
		}
		rs, err := c.GetRules(ch.Table, ch)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			comment, _ := userdata.GetString(r.UserData, userdata.TypeComment)
			out[ch.Name] = append(out[ch.Name], comment)
		}
	}
	return out
}

// TestReachIsWritten: an internal port admits networks and refuses the
// rest; a private one admits its module's networks; a host port admits
// loopback first. The ports are set elements: the rules are as many for
// five ports as for one.
func TestReachIsWritten(t *testing.T) {
	f, table := testFirewall(t)
	reach := []Reach{
		{Link: "fly-9995", Port: 80},
		{Link: "fly-9995", Port: 8080},
		{Link: "fly-9995", Port: 81, Private: true, From: []string{"fly-9996", "fly-9997"}},
		{Port: 82},
		{Port: 83, Private: true, From: []string{"fly-9996"}},
	}
	if err := f.SetProjection(Projection{Reach: reach}); err != nil {
		t.Fatal(err)
	}
	ok, n, err := Exists(table)
	// reach: replies, from, internal, refuse; reach-host: replies, lo, from, internal, refuse.
	if err != nil || !ok || n != 9 {
		t.Fatalf("table %s: exists %v with %d rules (%v), want 9", table, ok, n, err)
	}
	key := func(parts ...[]byte) string { return string(slices.Concat(parts...)) }
	port := tcpKey
	name := ifnameKey
	want := map[string][]string{
		"reach-guarded":       {key(name("fly-9995"), port(80)), key(name("fly-9995"), port(8080)), key(name("fly-9995"), port(81))},
		"reach-internal":      {key(name("fly-9995"), port(80)), key(name("fly-9995"), port(8080))},
		"reach-from":          {key(name("fly-9995"), port(81), name("fly-9996")), key(name("fly-9995"), port(81), name("fly-9997"))},
		"reach-host-guarded":  {key(port(82)), key(port(83))},
		"reach-host-internal": {key(port(82))},
		"reach-host-from":     {key(port(83), name("fly-9996"))},
	}
	for _, keys := range want {
		slices.Sort(keys)
	}
	if got := setElements(t, table, nftables.TableFamilyIPv4); !reflect.DeepEqual(got, want) {
		t.Errorf("sets of %s:\n got %q\nwant %q", table, got, want)
	}
	if got := setElements(t, table, nftables.TableFamilyIPv6); !reflect.DeepEqual(got, map[string][]string{"reach-host-guarded": {key(port(82)), key(port(83))}}) {
		t.Errorf("the host's ports are not guarded on IPv6: sets %q", got)
	}
	if err := f.SetProjection(Projection{}); err != nil {
		t.Fatal(err)
	}
	if ok, _, _ := Exists(table); ok || hasTable6(t, table) {
		t.Error("an empty projection left a table")
	}
}

// TestReachChangesInPlace: a change of ports only changes the sets'
// elements, in place; a table that is not as written (deleted behind the
// daemon's back) is written whole instead.
func TestReachChangesInPlace(t *testing.T) {
	f, table := testFirewall(t)
	first := []Reach{{Port: 82}, {Link: "fly-9995", Port: 80}}
	if err := f.SetProjection(Projection{Reach: first}); err != nil {
		t.Fatal(err)
	}
	// An element the projection does not know of shows whether the next
	// write rewrote the table or changed it.
	c, err := nftables.New()
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseLasting()
	marker := string(slices.Concat(tcpKey(9), ifnameKey("fly-9990")))
	hostFrom := &nftables.Set{Table: &nftables.Table{Name: table, Family: nftables.TableFamilyIPv4}, Name: "reach-host-from", Concatenation: true}
	if err := c.SetAddElements(hostFrom, []nftables.SetElement{{Key: []byte(marker)}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	second := []Reach{{Port: 83}, {Link: "fly-9995", Port: 80}, {Link: "fly-9995", Port: 81, Private: true, From: []string{"fly-9996"}}}
	if err := f.SetProjection(Projection{Reach: second}); err != nil {
		t.Fatal(err)
	}
	want := func(extra ...string) map[string][]string {
		m := map[string][]string{
			"reach-guarded":       {string(slices.Concat(ifnameKey("fly-9995"), tcpKey(80))), string(slices.Concat(ifnameKey("fly-9995"), tcpKey(81)))},
			"reach-internal":      {string(slices.Concat(ifnameKey("fly-9995"), tcpKey(80)))},
			"reach-from":          {string(slices.Concat(ifnameKey("fly-9995"), tcpKey(81), ifnameKey("fly-9996")))},
			"reach-host-guarded":  {string(tcpKey(83))},
			"reach-host-internal": {string(tcpKey(83))},
		}
		if len(extra) > 0 {
			m["reach-host-from"] = extra
		}
		for _, keys := range m {
			slices.Sort(keys)
		}
		return m
	}
	if got := setElements(t, table, nftables.TableFamilyIPv4); !reflect.DeepEqual(got, want(marker)) {
		t.Errorf("after a change of ports (in place, the marker kept):\n got %q\nwant %q", got, want(marker))
	}
	if got := setElements(t, table, nftables.TableFamilyIPv6); !reflect.DeepEqual(got, map[string][]string{"reach-host-guarded": {string(tcpKey(83))}}) {
		t.Errorf("IPv6 sets after a change: %q", got)
	}

	// A port whose admitted networks change keeps its other elements.
	third := slices.Clone(second)
	third[2] = Reach{Link: "fly-9995", Port: 81, Private: true, From: []string{"fly-9997", "fly-9998"}}
	if err := f.SetProjection(Projection{Reach: third}); err != nil {
		t.Fatal(err)
	}
	w := want(marker)
	w["reach-from"] = []string{string(slices.Concat(ifnameKey("fly-9995"), tcpKey(81), ifnameKey("fly-9997"))), string(slices.Concat(ifnameKey("fly-9995"), tcpKey(81), ifnameKey("fly-9998")))}
	if got := setElements(t, table, nftables.TableFamilyIPv4); !reflect.DeepEqual(got, w) {
		t.Errorf("after a change of a private port's networks:\n got %q\nwant %q", got, w)
	}

	c.DelTable(&nftables.Table{Name: table, Family: nftables.TableFamilyIPv4})
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.SetProjection(Projection{Reach: []Reach{{Port: 84}, {Link: "fly-9995", Port: 80}}}); err != nil {
		t.Fatalf("a change to a table deleted behind the daemon's back: %v", err)
	}
	if ok, n, err := Exists(table); !ok || n != 9 || err != nil {
		t.Errorf("table %s rewritten: exists %v with %d rules (%v), want 9", table, ok, n, err)
	}
	if got := setElements(t, table, nftables.TableFamilyIPv4)["reach-host-guarded"]; !slices.Equal(got, []string{string(tcpKey(84))}) {
		t.Errorf("rewritten table's reach-host-guarded: %q, want port 84", got)
	}
}

// setElements reads back the keys of every set of table, sorted, by set.
func setElements(t *testing.T, table string, family nftables.TableFamily) map[string][]string {
	t.Helper()
	c, err := nftables.New()
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseLasting()
	sets, err := c.GetSets(&nftables.Table{Name: table, Family: family})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, s := range sets {
		es, err := c.GetSetElements(s)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			out[s.Name] = append(out[s.Name], string(e.Key))
		}
		slices.Sort(out[s.Name])
	}
	return out
}

// rules6 is how many rules the ip6 table holds, 0 for none.
func rules6(t *testing.T, table string) int {
	t.Helper()
	if !hasTable6(t, table) {
		return 0
	}
	c, err := nftables.New()
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseLasting()
	chains, err := c.ListChainsOfTableFamily(nftables.TableFamilyIPv6)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, ch := range chains {
		if ch.Table.Name == table {
			rs, err := c.GetRules(ch.Table, ch)
			if err != nil {
				t.Fatal(err)
			}
			n += len(rs)
		}
	}
	return n
}

func hasTable6(t *testing.T, table string) bool {
	t.Helper()
	c, err := nftables.New()
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseLasting()
	ts, err := c.ListTablesOfFamily(nftables.TableFamilyIPv6)
	if err != nil {
		t.Fatal(err)
	}
	return slices.ContainsFunc(ts, func(x *nftables.Table) bool { return x.Name == table })
}
