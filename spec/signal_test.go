package spec

import (
	"syscall"
	"testing"
)

func TestParseSignal(t *testing.T) {
	tests := []struct {
		in   string
		want syscall.Signal
		ok   bool
	}{
		{"SIGTERM", syscall.SIGTERM, true},
		{"TERM", syscall.SIGTERM, true},
		{"sigterm", syscall.SIGTERM, true},
		{"term", syscall.SIGTERM, true},
		{"15", syscall.SIGTERM, true},
		{"SIGINT", syscall.SIGINT, true},
		{"quit", syscall.SIGQUIT, true},
		{"SIGKILL", syscall.SIGKILL, true},
		{"usr1", syscall.SIGUSR1, true},
		{"SIGWINCH", syscall.SIGWINCH, true},
		{"34", syscall.Signal(34), true},
		{"", 0, false},
		{"SIG", 0, false},
		{"SIGNOPE", 0, false},
		{"0", 0, false},
		{"65", 0, false},
		{"-15", 0, false},
		{"SIG TERM", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseSignal(tt.in)
			if (err == nil) != tt.ok || got != tt.want {
				t.Errorf("ParseSignal(%q) = %v, %v; want %v, ok=%v", tt.in, got, err, tt.want, tt.ok)
			}
		})
	}
}

func TestEnvName(t *testing.T) {
	for in, want := range map[string]string{
		"http":       "HTTP",
		"http-admin": "HTTP_ADMIN",
		"a-b-c9":     "A_B_C9",
	} {
		if got := EnvName(in); got != want {
			t.Errorf("EnvName(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestStopSignalIsSpeltOneWay: however a stop signal is written, the
// spec holds its one name after SetDefaults, or its number when it has
// none (a real-time signal).
func TestStopSignalIsSpeltOneWay(t *testing.T) {
	for in, want := range map[string]string{"term": "SIGTERM", "TERM": "SIGTERM", "SIGTERM": "SIGTERM", "9": "SIGKILL", "sigusr1": "SIGUSR1", "34": "34"} {
		s := Stop{Signal: in}
		s.setDefaults()
		if s.Signal != want {
			t.Errorf("%q is spelt %q, want %q", in, s.Signal, want)
		}
	}
}
