package spec

import (
	"fmt"
	"strconv"
	"strings"
	"syscall"
)

// signals are the Linux signals a workload may reasonably be stopped with;
// real-time signals are reachable by number.
var signals = map[string]syscall.Signal{
	"SIGHUP": syscall.SIGHUP, "SIGINT": syscall.SIGINT, "SIGQUIT": syscall.SIGQUIT,
	"SIGILL": syscall.SIGILL, "SIGTRAP": syscall.SIGTRAP, "SIGABRT": syscall.SIGABRT,
	"SIGBUS": syscall.SIGBUS, "SIGFPE": syscall.SIGFPE, "SIGKILL": syscall.SIGKILL,
	"SIGUSR1": syscall.SIGUSR1, "SIGSEGV": syscall.SIGSEGV, "SIGUSR2": syscall.SIGUSR2,
	"SIGPIPE": syscall.SIGPIPE, "SIGALRM": syscall.SIGALRM, "SIGTERM": syscall.SIGTERM,
	"SIGCHLD": syscall.SIGCHLD, "SIGCONT": syscall.SIGCONT, "SIGSTOP": syscall.SIGSTOP,
	"SIGTSTP": syscall.SIGTSTP, "SIGTTIN": syscall.SIGTTIN, "SIGTTOU": syscall.SIGTTOU,
	"SIGURG": syscall.SIGURG, "SIGXCPU": syscall.SIGXCPU, "SIGXFSZ": syscall.SIGXFSZ,
	"SIGVTALRM": syscall.SIGVTALRM, "SIGPROF": syscall.SIGPROF, "SIGWINCH": syscall.SIGWINCH,
	"SIGIO": syscall.SIGIO, "SIGPWR": syscall.SIGPWR, "SIGSYS": syscall.SIGSYS,
}

// maxSignal is the highest signal number Linux accepts (SIGRTMAX).
const maxSignal = 64

// signalNames are signals' names by number: each has one.
var signalNames = func() (names [maxSignal + 1]string) {
	for name, sig := range signals {
		names[sig] = name
	}
	return names
}()

// ParseSignal accepts "SIGTERM", "TERM", "sigterm" or "15".
func ParseSignal(name string) (syscall.Signal, error) {
	if sig, ok := signals[name]; ok { // spelt as SetDefaults spells it
		return sig, nil
	}
	if n, err := strconv.Atoi(name); err == nil {
		if n < 1 || n > maxSignal {
			return 0, fmt.Errorf("signal number %d out of range 1..%d", n, maxSignal)
		}
		return syscall.Signal(n), nil
	}
	up := strings.ToUpper(name)
	if !strings.HasPrefix(up, "SIG") {
		up = "SIG" + up
	}
	if sig, ok := signals[up]; ok {
		return sig, nil
	}
	return 0, fmt.Errorf("unknown signal %q", name)
}

// signalName is the canonical spelling, so that "term" and "SIGTERM" compare
// equal after SetDefaults; numbers without a name stay numbers.
func signalName(sig syscall.Signal) string {
	if sig > 0 && sig <= maxSignal && signalNames[sig] != "" {
		return signalNames[sig]
	}
	return strconv.Itoa(int(sig))
}
