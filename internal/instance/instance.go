// Package instance names what one daemon makes on the host, outside its
// own directories: its nftables table, its cgroup parent, its embedded
// registry's port. Each is keyed to the daemon's run dir, so daemons side
// by side (an installed service and a developer's FLYD_HOME, the tests'
// daemons) never meet in the host's shared namespaces: none deletes,
// signals or reuses what another made. It is not where those things are
// made; the packages that make them take the names from here.
package instance

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"net"
	"strconv"
)

// DefaultRunDir is the run dir of a daemon with the default paths: the
// installed service, whose names are the plain ones.
const DefaultRunDir = "/run/flyd"

// DefaultRegistryPort is where the default daemon's embedded registry
// listens.
const DefaultRegistryPort = 9471

// registryPorts is how many ports, from DefaultRegistryPort on and below
// the kernel's ephemeral range, another daemon's registry port is hashed
// into.
const registryPorts = 1000

// Name is "flyd" for the daemon of the default run dir and "flyd-" with
// eight hex digits of the path's hash for any other: the name of its
// nftables table and its cgroup parent. runDir is absolute and resolved.
func Name(runDir string) string {
	if runDir == DefaultRunDir {
		return "flyd"
	}
	sum := sha256.Sum256([]byte(runDir))
	return "flyd-" + hex.EncodeToString(sum[:4])
}

// RegistryListen is where the daemon of runDir's embedded registry listens
// unless told: 127.0.0.1:9471 for the default daemon, a port hashed from
// the run dir above it for any other, the same at every start (the URL
// given to the workloads stays true across restarts). A port another
// process holds anyway leaves the daemon's registry on a port the kernel
// chooses, logged and shown by flyd status (daemon's listenEmbedded).
func RegistryListen(runDir string) string {
	port := DefaultRegistryPort
	if runDir != DefaultRunDir {
		sum := sha256.Sum256([]byte(runDir))
		port += 1 + int(binary.BigEndian.Uint32(sum[:4])%(registryPorts-1))
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}
