package spec

// Health is a readiness and liveness probe. Exactly one of TCP, HTTP and Exec
// is set. Workloads that list this one in After wait until it passes.
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

	Interval    Duration `json:"interval,omitzero"`     // default 2s
	Timeout     Duration `json:"timeout,omitzero"`      // default 1s
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
