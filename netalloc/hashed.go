package netalloc

import (
	"crypto/sha256"
	"encoding/binary"
)

// HashInput identifies a port: the workload identity plus the endpoint,
// and the port mode.
type HashInput struct {
	Workspace string
	Module    string
	Service   string
	Endpoint  string
	API       string
	// Mode is ModeHost or ModeContainer: codefly hashes a port published
	// from a container apart from the port of the same service run on the
	// host, so that both can run at once on one host without colliding.
	Mode PortMode
}

// PortMode is the host-port contention axis of codefly's hash.
type PortMode string

const (
	// ModeHost is every runtime that binds the host's port itself (native,
	// nix): the hash of the identity alone, as before modes existed.
	ModeHost PortMode = ""
	// ModeContainer is a containerd workload's: "container" is appended to
	// what is hashed.
	ModeContainer PortMode = "container"
)

const (
	// Ports below 1024 need privileges and the range just above them is
	// crowded, so hashed ports start here.
	hashFloor = 1024
	// Spreads hashes across 1024..65525; together with the API digit the
	// result never exceeds 65535.
	hashSpan = 64502
	// Clearing the last digit can drop a base below 1030; codefly lifts it
	// back so every API digit still lands above 1024.
	minBase = 1030
)

// HashedPort returns the codefly port for in. Changing anything here
// moves every hashed port users have already written into their configs
// and clients, so the golden tests pin it.
func HashedPort(in HashInput) int {
	key := in.Workspace + "-" + in.Module + "-" + in.Service + "-" + in.Endpoint
	if in.Mode != ModeHost {
		key += "-" + string(in.Mode)
	}
	sum := sha256.Sum256([]byte(key))
	n := binary.BigEndian.Uint64(sum[:8])
	return clampBase(hashFloor+int(n%hashSpan)) + APIDigit(in.API)
}

// clampBase leaves the last decimal digit free for the API so that the
// endpoints of one service sit next to each other (…0 tcp, …1 http, …).
func clampBase(base int) int {
	base = base / 10 * 10
	if base < minBase {
		return minBase
	}
	return base
}

// APIDigit is the last decimal digit of a hashed port for api. Unknown
// APIs share tcp's digit rather than failing, matching codefly.
func APIDigit(api string) int {
	switch api {
	case "http":
		return 1
	case "rest":
		return 2
	case "grpc":
		return 3
	default:
		return 0
	}
}
