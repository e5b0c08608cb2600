package spec

import (
	"errors"
	"regexp"
	"regexp/syntax"
)

// Health is a readiness and liveness check. Exactly one of TCP, HTTP, Exec,
// Notify and Log is set. Workloads that list this one in After wait until
// it passes.
type Health struct {
	TCP string `json:"tcp,omitempty"` // endpoint name: healthy when it accepts a connection
	// Send and Expect make a tcp check a conversation: Send is written
	// once connected, and the reply must begin with Expect (alone, Expect
	// is a greeting the server sends first). Redis: PING, +PONG.
	Send   string `json:"send,omitempty"`
	Expect string `json:"expect,omitempty"`

	HTTP *HTTPCheck `json:"http,omitempty"`
	Exec []string   `json:"exec,omitempty"` // healthy when the command exits 0
	// Notify: the program says when it is ready, as to systemd's
	// Type=notify: READY=1 on the NOTIFY_SOCKET flyd gives it.
	Notify bool `json:"notify,omitempty"`
	// Watchdog, with Notify, is systemd's WatchdogSec=: once ready, the
	// program sends WATCHDOG=1 at least this often, or is unhealthy. It
	// is given the period as WATCHDOG_USEC.
	Watchdog Duration `json:"watchdog,omitzero"`
	// Log is a regular expression (RE2 syntax): the run is healthy once a
	// line of its output matches it, and unhealthy when none has by
	// Timeout (or StartPeriod, if longer) from its start.
	Log string `json:"log,omitempty"`

	Interval    Duration `json:"interval,omitzero"`     // default 2s
	Timeout     Duration `json:"timeout,omitzero"`      // default 1s; 1m for a log check
	Failures    int      `json:"failures,omitempty"`    // consecutive failures before unhealthy; default 3
	StartPeriod Duration `json:"start_period,omitzero"` // failures during this grace period do not count
	Restart     bool     `json:"restart,omitempty"`     // restart the workload when it turns unhealthy
}

// HTTPCheck is healthy when GET Path on Endpoint answers with Expect.
type HTTPCheck struct {
	Endpoint string `json:"endpoint"`
	Path     string `json:"path,omitempty"`   // default "/"
	Expect   int    `json:"expect,omitempty"` // default 200
}

// MaxTCPExchange bounds a tcp check's Send and Expect.
const MaxTCPExchange = 1 << 10

// MaxLogPattern bounds a log check's regular expression.
const MaxLogPattern = 1 << 10

// MinWatchdog is the shortest watchdog period: a keepalive is sent about
// twice a period, and a notify socket is read at most 64 datagrams a
// second.
const MinWatchdog = MinHealthInterval

// validateLog refuses a log check's pattern that does not compile, or is
// too long to be one.
func (h *Health) validateLog(p *problems) {
	switch {
	case h.Log == "":
	case len(h.Log) > MaxLogPattern:
		p.add("health.log", "is %d bytes; at most %d", len(h.Log), MaxLogPattern)
	default:
		if _, err := regexp.Compile(h.Log); err != nil {
			// What is wrong, not where: the error would quote the pattern.
			why := "it does not parse"
			var se *syntax.Error
			if errors.As(err, &se) {
				why = string(se.Code)
			}
			p.add("health.log", "is not a regular expression (RE2 syntax): %s", why)
		}
	}
}
