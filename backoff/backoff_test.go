package backoff

import (
	"testing"
	"time"
)

func TestDelayDoublesCapsAndJitters(t *testing.T) {
	const ms = time.Millisecond
	p := Policy{Initial: 250 * ms, Max: 30 * time.Second}
	tests := []struct {
		n    int
		u    float64
		want time.Duration
	}{
		{1, 0.5, 250 * ms},
		{2, 0.5, 500 * ms},
		{3, 0.5, 1000 * ms},
		{8, 0.5, 30 * time.Second},  // 250ms·2^7 = 32s, capped
		{50, 0.5, 30 * time.Second}, // no overflow however long the run
		{1, 0, 200 * ms},            // -20%
		{1, 0.999999, 300 * ms},     // +20%
	}
	for _, tt := range tests {
		got := p.jittered(tt.n, tt.u)
		if d := got - tt.want; d > ms || d < -ms {
			t.Errorf("jittered(n=%d, u=%v) = %v, want %v", tt.n, tt.u, got, tt.want)
		}
	}
	for n := 1; n < 10; n++ {
		if d := p.Delay(n); d < p.jittered(n, 0) || d > p.jittered(n, 1) {
			t.Errorf("Delay(%d) = %v, outside its jitter", n, d)
		}
	}
}

func TestWindowForgetsOldFailures(t *testing.T) {
	var f Window
	t0 := time.Unix(1000, 0)
	if n := f.Add(t0, time.Minute); n != 1 {
		t.Fatalf("first failure counted %d", n)
	}
	if n := f.Add(t0.Add(10*time.Second), time.Minute); n != 2 {
		t.Fatalf("second failure counted %d", n)
	}
	// A run that stayed up longer than the window: every earlier failure
	// has fallen out.
	if n := f.Add(t0.Add(2*time.Minute), time.Minute); n != 1 {
		t.Fatalf("after a stable run the count is %d, want 1", n)
	}
	f.Reset()
	if n := f.Add(t0.Add(3*time.Minute), time.Minute); n != 1 {
		t.Fatalf("after reset the count is %d, want 1", n)
	}
}
