package health

import (
	"errors"
	"syscall"
	"testing"
	"time"
)

func TestTCP(t *testing.T) {
	live := listen(t).Addr().String()
	tests := []struct {
		name    string
		addr    string
		refused bool
	}{
		{"live listener", live, false},
		{"closed port", closedPort(t), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err, took := check(TCP(nil, tt.addr), time.Second)
			if tt.refused != (err != nil) {
				t.Fatalf("Check = %v, want refused=%v", err, tt.refused)
			}
			if tt.refused && !errors.Is(err, syscall.ECONNREFUSED) {
				t.Fatalf("Check = %v, want ECONNREFUSED", err)
			}
			if took > 500*time.Millisecond {
				t.Fatalf("Check took %s, want an immediate answer", took)
			}
		})
	}
}
