package instance

import (
	"net"
	"strconv"
	"testing"
)

// TestNamesKeyedToRunDir: the default daemon keeps the plain names; any
// other gets names of its own, stable across starts, apart from the
// default's.
func TestNamesKeyedToRunDir(t *testing.T) {
	if Name(DefaultRunDir) != "flyd" || RegistryListen(DefaultRunDir) != "127.0.0.1:9471" {
		t.Fatalf("default daemon: %s, %s", Name(DefaultRunDir), RegistryListen(DefaultRunDir))
	}
	seen := map[string]bool{}
	for _, dir := range []string{"/tmp/flyd/run", "/tmp/flyd2/run", "/srv/ci-7/run"} {
		n := Name(dir)
		if n == "flyd" || len(n) != len("flyd-")+8 || n != Name(dir) || seen[n] {
			t.Errorf("Name(%s) = %s: want flyd-HASH, its own and stable", dir, n)
		}
		seen[n] = true
		_, p, _ := net.SplitHostPort(RegistryListen(dir))
		port, _ := strconv.Atoi(p)
		if port <= DefaultRegistryPort || port >= DefaultRegistryPort+registryPorts || RegistryListen(dir) != RegistryListen(dir) {
			t.Errorf("RegistryListen(%s) = %s: want a stable port above the default's", dir, RegistryListen(dir))
		}
	}
}
