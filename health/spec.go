package health

import (
	"fmt"
	"strconv"
	"syscall"

	"github.com/flyd-dev/flyd/internal/execenv"
	"github.com/flyd-dev/flyd/sandbox"
	"github.com/flyd-dev/flyd/spec"
)

// ConfigOf is how a Monitor runs the check of h.
func ConfigOf(h *spec.Health) Config {
	return Config{Interval: h.Interval.Duration, Timeout: h.Timeout.Duration, Failures: h.Failures, StartPeriod: h.StartPeriod.Duration}
}

// ProbeOf builds the check h asks for, inside nw: a tcp or http check on
// the port portOf gives the endpoint it names, or else its exec check,
// which exec builds (the command's environment, user and files are the
// workload's, which only its supervisor knows).
func ProbeOf(h *spec.Health, nw *sandbox.Network, portOf func(endpoint string) (int, bool), exec func(argv []string) (Probe, error)) (Probe, error) {
	port := func(ep string) (string, error) {
		if p, ok := portOf(ep); ok {
			return strconv.Itoa(p), nil
		}
		return "", fmt.Errorf("health check names endpoint %q, which has no port", ep)
	}
	switch {
	case h.TCP != "":
		p, err := port(h.TCP)
		if err != nil {
			return nil, err
		}
		return TCPExchange(nw, "127.0.0.1:"+p, h.Send, h.Expect), nil
	case h.HTTP != nil:
		p, err := port(h.HTTP.Endpoint)
		if err != nil {
			return nil, err
		}
		return HTTP(nw, "http://127.0.0.1:"+p+h.HTTP.Path, h.HTTP.Expect), nil
	}
	return exec(h.Exec)
}

// Credential is who an exec check of a workload run as user runs as: that
// user, so that a check never has more than the workload it checks (nil:
// the daemon's own, for a workload run as root). A user that lives in a
// container's image (imageUser), not on the host, is checked as nobody.
func Credential(user string, imageUser bool) (*syscall.Credential, error) {
	switch {
	case user == "":
		return nil, nil
	case imageUser:
		return &syscall.Credential{Uid: nobody, Gid: nobody, Groups: []uint32{}}, nil
	}
	a, err := execenv.Lookup(user)
	if err != nil {
		return nil, fmt.Errorf("health check user %q: %w", user, err)
	}
	return a.Credential(), nil
}

// nobody is the uid and gid of the account with no rights.
const nobody = 65534
