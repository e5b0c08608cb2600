package netalloc

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/big"
	"strconv"
	"testing"
)

func TestHashedPortGolden(t *testing.T) {
	// Values produced by codefly itself; they must never change. The
	// container mode's follow ToNamedPort in codefly-dev/core v0.3.8,
	// network/port.go: the mode, when not empty, is one more "-"-joined
	// segment of what is hashed (PortModeFor gives "container" to a
	// container, "" to every host-bound runtime).
	tests := []struct {
		in   HashInput
		want int
	}{
		{HashInput{"demo", "store", "postgres", "tcp", "tcp", ModeHost}, 56960},
		{HashInput{"demo", "api", "server", "grpc", "grpc", ModeHost}, 54953},
		{HashInput{"demo", "api", "server", "http", "http", ModeHost}, 18591},
		{HashInput{"acme", "web", "frontend", "rest", "rest", ModeHost}, 2032},
		{HashInput{"demo", "store", "postgres", "tcp", "tcp", ModeContainer}, 47570},
		{HashInput{"demo", "api", "server", "grpc", "grpc", ModeContainer}, 17943},
		{HashInput{"demo", "api", "server", "http", "http", ModeContainer}, 41661},
		{HashInput{"acme", "web", "frontend", "rest", "rest", ModeContainer}, 24832},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.in), func(t *testing.T) {
			if got := HashedPort(tt.in); got != tt.want {
				t.Errorf("HashedPort(%+v) = %d, want %d", tt.in, got, tt.want)
			}
			if got := referencePort(t, tt.in); got != tt.want {
				t.Errorf("referencePort(%+v) = %d, want %d (reference is wrong)", tt.in, got, tt.want)
			}
		})
	}
}

// referencePort recomputes the algorithm by a deliberately different
// route (hex text, big.Int, string digits) so a shared mistake in
// byte order or arithmetic cannot hide in both.
func referencePort(t *testing.T, in HashInput) int {
	t.Helper()
	key := fmt.Sprintf("%s-%s-%s-%s", in.Workspace, in.Module, in.Service, in.Endpoint)
	if in.Mode != "" {
		key = fmt.Sprintf("%s-%s", key, in.Mode)
	}
	sum := sha256.Sum256([]byte(key))
	hexSum := hex.EncodeToString(sum[:])
	n, err := strconv.ParseUint(hexSum[:16], 16, 64)
	if err != nil {
		t.Fatalf("parse %q: %v", hexSum[:16], err)
	}
	mod := new(big.Int).Mod(new(big.Int).SetUint64(n), big.NewInt(64502))
	base := 1024 + int(mod.Int64())
	digits := strconv.Itoa(base)
	base, err = strconv.Atoi(digits[:len(digits)-1] + "0")
	if err != nil {
		t.Fatal(err)
	}
	if base < 1030 {
		base = 1030
	}
	digit := map[string]int{"http": 1, "rest": 2, "grpc": 3}[in.API]
	return base + digit
}

func TestHashedPortMatchesReference(t *testing.T) {
	tests := []HashInput{
		{"ws", "mod", "svc", "ep", "tcp", ModeHost},
		{"prod", "billing", "invoices", "grpc", "grpc", ModeHost},
		{"prod", "billing", "invoices", "rest", "rest", ModeContainer},
		{"", "", "", "", "", ModeHost},
		{"", "", "", "", "", ModeContainer},
		{"w-s", "m", "s", "e", "http", ModeHost},
		{"ünïcode", "модуль", "服务", "端点", "websocket", ModeContainer},
		{"demo", "store", "postgres", "tcp", "grpc", ModeHost},
	}
	for _, in := range tests {
		t.Run(fmt.Sprint(in), func(t *testing.T) {
			if got, want := HashedPort(in), referencePort(t, in); got != want {
				t.Errorf("HashedPort(%+v) = %d, reference %d", in, got, want)
			}
		})
	}
}

func TestAPIDigit(t *testing.T) {
	tests := []struct {
		api  string
		want int
	}{
		{"tcp", 0}, {"http", 1}, {"rest", 2}, {"grpc", 3},
		{"", 0}, {"udp", 0}, {"HTTP", 0},
	}
	for _, tt := range tests {
		if got := APIDigit(tt.api); got != tt.want {
			t.Errorf("APIDigit(%q) = %d, want %d", tt.api, got, tt.want)
		}
	}
}

func TestClampBase(t *testing.T) {
	tests := []struct{ in, want int }{
		{1024, 1030}, {1029, 1030}, {1030, 1030}, {1039, 1030},
		{1040, 1040}, {56967, 56960}, {65525, 65520},
	}
	for _, tt := range tests {
		if got := clampBase(tt.in); got != tt.want {
			t.Errorf("clampBase(%d) = %d, want %d", tt.in, got, tt.want)
		}
	}
}

// TestHashedPortClampsLowBase finds, by search, a real identity whose
// base falls in 1024..1029 so the clamp is exercised end to end rather
// than only through clampBase.
func TestHashedPortClampsLowBase(t *testing.T) {
	// About 6 in 64502 inputs qualify; the cap only guards against a
	// broken search looping forever.
	for i := 0; i < 2_000_000; i++ {
		in := HashInput{"clamp", "mod", "svc", "ep" + strconv.Itoa(i), "", ModeHost}
		sum := sha256.Sum256([]byte(in.Workspace + "-" + in.Module + "-" + in.Service + "-" + in.Endpoint))
		n, _ := strconv.ParseUint(hex.EncodeToString(sum[:8]), 16, 64)
		if 1024+n%64502 >= 1030 {
			continue
		}
		for _, api := range []string{"tcp", "http", "rest", "grpc"} {
			in.API = api
			if got, want := HashedPort(in), 1030+APIDigit(api); got != want {
				t.Errorf("HashedPort(%+v) = %d, want clamped %d", in, got, want)
			}
		}
		t.Logf("clamped input: endpoint %q", in.Endpoint)
		return
	}
	t.Fatal("no input with a base below 1030 found")
}

func TestHashedPortRange(t *testing.T) {
	for i := 0; i < 20000; i++ {
		for _, api := range []string{"tcp", "http", "rest", "grpc", "other"} {
			in := HashInput{"ws", "m" + strconv.Itoa(i%7), "s" + strconv.Itoa(i), "e", api, ModeHost}
			if p := HashedPort(in); p < 1030 || p > 65535 {
				t.Fatalf("HashedPort(%+v) = %d, outside [1030, 65535]", in, p)
			}
		}
	}
	// The largest possible base plus the largest digit must still fit.
	if top := clampBase(1024+64501) + APIDigit("grpc"); top > 65535 {
		t.Fatalf("largest port %d exceeds 65535", top)
	}
}
