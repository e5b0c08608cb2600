package spec

// RestartPolicy says when an exited workload is started again.
type RestartPolicy string

const (
	RestartNever     RestartPolicy = "never"
	RestartOnFailure RestartPolicy = "on-failure" // the default: a clean exit 0 is left alone
	RestartAlways    RestartPolicy = "always"
)

// UnlimitedRestarts as Restart.MaxRestarts means the supervisor never gives
// up. Zero cannot mean that, because an omitted field reads as zero and
// becomes the default of 5.
const UnlimitedRestarts = -1

// Restart bounds how hard the supervisor tries: after MaxRestarts failures
// inside the sliding Window the workload is marked failed and left stopped.
type Restart struct {
	Policy      RestartPolicy `json:"policy,omitempty"`
	MaxRestarts int           `json:"max_restarts,omitempty"` // omitted or 0: 5; -1: unlimited
	Window      Duration      `json:"window,omitzero"`        // default 1m
	Backoff     Backoff       `json:"backoff"`
}

// Backoff is the delay before a restart; it doubles from Initial up to Max.
type Backoff struct {
	Initial Duration `json:"initial,omitzero"` // default 250ms
	Max     Duration `json:"max,omitzero"`     // default 30s, or Initial if that is larger
}
