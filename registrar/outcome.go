package registrar

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/flyd-dev/flyd/registryclient"
)

// class is what an answer means for the schedule, whatever the request.
type class uint8

const (
	classOK class = iota
	// classGone: the registry does not know the id (410 on heartbeat, 404).
	classGone
	// classDown: transport failure, timeout or 5xx; the registry may be
	// back any moment, so retry soon and then less often.
	classDown
	// classRefused: the key was refused. Retrying cannot help until an
	// operator fixes the key, so retry rarely.
	classRefused
	// classInvalid: the registry refused this content (400), or its id is
	// held by something else (409). Only new content, or someone clearing
	// the id, can help; until then retry rarely.
	classInvalid
	// classAborted: the request was cut short by its own cancellation (the
	// engine stopping or the work being superseded); it says nothing about
	// the registry.
	classAborted
)

func classify(err error) class {
	switch {
	case err == nil:
		return classOK
	case errors.Is(err, registryclient.ErrGone), errors.Is(err, registryclient.ErrNotFound):
		return classGone
	case errors.Is(err, registryclient.ErrUnauthorized):
		return classRefused
	case errors.Is(err, registryclient.ErrBadRequest), errors.Is(err, registryclient.ErrConflict):
		return classInvalid
	case errors.Is(err, context.Canceled):
		// A per-request timeout is DeadlineExceeded and lands in classDown:
		// a registry too slow to answer is as good as down.
		return classAborted
	default:
		return classDown
	}
}

func (c class) failure() bool { return c == classDown || c == classRefused || c == classInvalid }

func (c class) String() string {
	switch c {
	case classOK:
		return "ok"
	case classGone:
		return "gone"
	case classDown:
		return "unreachable"
	case classRefused:
		return "unauthorized"
	case classInvalid:
		return "refused content"
	default:
		return "aborted"
	}
}

// Backoff bounds. A down registry is retried quickly at first (most
// outages are a restart); a refused key or refused content is retried
// rarely, because only a human can fix it and a tight loop would flood
// the registry's logs with 401s.
const (
	downFirst    = 500 * time.Millisecond
	downMax      = 30 * time.Second
	refusedFirst = 5 * time.Second
	refusedMax   = 5 * time.Minute
)

// backoff is the wait before the n-th retry (n >= 1) of a failing
// instance. Half of it is random so that 1,000 instances that failed
// together do not retry together.
func backoff(c class, n int) time.Duration {
	first, limit := downFirst, downMax
	if c == classRefused || c == classInvalid {
		first, limit = refusedFirst, refusedMax
	}
	d := first
	for i := 1; i < n && d < limit; i++ {
		d *= 2
	}
	d = min(d, limit)
	return d/2 + rand.N(d/2+1)
}

// period is the time between two heartbeats of a lease: a third of it,
// ±10% so that instances registered together drift apart.
func period(lease time.Duration) time.Duration {
	p := max(lease/3, minPeriod)
	return p - p/10 + rand.N(p/5+1)
}
