package supervisor

import (
	"testing"
	"time"
)

func TestBackoffDoublesCapsAndJitters(t *testing.T) {
	const ms = time.Millisecond
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
		got := backoff(250*ms, 30*time.Second, tt.n, tt.u)
		if d := got - tt.want; d > ms || d < -ms {
			t.Errorf("backoff(n=%d, u=%v) = %v, want %v", tt.n, tt.u, got, tt.want)
		}
	}
}

func TestFailureWindowForgetsOldFailures(t *testing.T) {
	var f failureWindow
	t0 := time.Unix(1000, 0)
	if n := f.add(t0, time.Minute); n != 1 {
		t.Fatalf("first failure counted %d", n)
	}
	if n := f.add(t0.Add(10*time.Second), time.Minute); n != 2 {
		t.Fatalf("second failure counted %d", n)
	}
	// A run that stayed up longer than the window: every earlier failure
	// has fallen out.
	if n := f.add(t0.Add(2*time.Minute), time.Minute); n != 1 {
		t.Fatalf("after a stable run the count is %d, want 1", n)
	}
	f.reset()
	if n := f.add(t0.Add(3*time.Minute), time.Minute); n != 1 {
		t.Fatalf("after reset the count is %d, want 1", n)
	}
}
