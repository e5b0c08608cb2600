package netalloc

import (
	"crypto/sha256"
	"encoding/binary"
)

// HashInput identifies a port: the workload identity plus the endpoint.
type HashInput struct {
	Workspace string
	Module    string
	Service   string
	Endpoint  string
	API       string
}

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
