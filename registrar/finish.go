package registrar

import (
	"context"
	"time"

	"go.uber.org/zap"
)

// finish applies a request's answer to its entry and queues what the entry
// needs next. It runs on the worker that made the request; the scheduler
// only learns that the worker is free again.
func (r *Registrar) finish(engine context.Context, j job, err error) {
	now := time.Now()
	c := classify(err)
	if err != nil && engine.Err() != nil {
		// The engine is stopping: whatever the request saw, it was cut
		// short, and the next Run starts from what we believed before.
		c = classAborted
	} else if c == classAborted && j.ctx.Err() == nil {
		// Canceled, but not by us: a confused client, not a reason to retry
		// without backoff.
		c = classDown
	}

	r.mu.Lock()
	e := j.e
	if e.superseded && err != nil {
		c = classAborted
	}
	e.inflight, e.cancel, e.superseded = opNone, nil, false
	c = r.apply(e, j, c, now)

	var report bool
	next := now
	switch {
	case c.failure():
		e.failures++
		r.failures++
		r.lastErr = err.Error()
		report = e.failing != c
		e.failing = c
		if c != classInvalid || j.gen == e.gen {
			next = now.Add(backoff(c, e.failures))
		} // else: refused content was replaced meanwhile; try the new one now
	case c == classOK:
		report = e.failures > 0
		e.failures, e.failing = 0, classOK
		next = e.nextAfter(now)
	default:
		next = e.nextAfter(now)
	}
	if c == classDown {
		r.down[e] = struct{}{}
	} else {
		delete(r.down, e)
	}
	if c == classOK || c == classGone {
		r.recovered(now)
	}
	owner, failures := e.owner, e.failures
	if !e.desired && !e.held {
		r.drop(e)
	} else {
		r.queue.at(e, next)
	}
	r.mu.Unlock()

	if report {
		if c == classOK {
			err = nil // a 404 on deregister is a success
		}
		r.report(owner, j, err, failures, next.Sub(now))
	}
}

// recovered retries at once every entry waiting out the backoff of an
// unreachable registry, since the registry answered again: after an
// outage the registry is caught up within a round of requests of its
// return, not at the end of each instance's own backoff. An entry that
// fails again goes back to its backoff, one step longer. Called with r.mu
// held.
func (r *Registrar) recovered(now time.Time) {
	for e := range r.down {
		r.queue.earlier(e, now)
	}
	clear(r.down)
}

// apply updates what the registrar believes the registry holds, and
// returns the class that counts for backoff and reporting. Called with
// r.mu held.
func (r *Registrar) apply(e *entry, j job, c class, now time.Time) class {
	switch j.op {
	case opRegister:
		if c == classGone {
			c = classDown // a register never answers 404/410: a broken registry
		}
		if c != classRefused && c != classInvalid {
			// Sent, and possibly landed even if we never saw the answer.
			e.held = true
		}
		if c == classOK {
			e.registered, e.regGen, e.renewedAt, e.lease = true, j.gen, now, leaseOf(&j.inst)
		}
	case opHeartbeat:
		switch c {
		case classOK:
			e.renewedAt = now
			r.heartbeats++
		case classGone:
			// Forgotten or reaped: due() now asks for a register, at once.
			r.log.Debug("registrar: lease lost, registering again", zap.String("id", e.id))
			e.registered, e.held = false, false
		}
	case opDeregister:
		switch c {
		case classOK, classGone:
			// Unknown to the registry is as deregistered as it gets.
			e.registered, e.held = false, false
			c = classOK
		case classAborted:
			// Superseded by a Set that wants it again (or the engine
			// stopping): it may or may not have landed.
			e.registered = false
		}
	}
	return c
}

// nextAfter is when an entry that did not fail needs its next request.
func (e *entry) nextAfter(now time.Time) time.Time {
	if e.due(now) == opHeartbeat {
		return e.renewedAt.Add(period(e.lease))
	}
	return now
}

// report logs a change of an instance's health and tells the daemon. Once
// per change: a registry down for an hour is one line per instance, not
// one per retry.
func (r *Registrar) report(owner string, j job, err error, failures int, retry time.Duration) {
	if err == nil {
		r.log.Info("registrar: registry requests recovered",
			zap.String("owner", owner), zap.String("id", j.id), zap.Stringer("op", j.op))
	} else {
		r.log.Warn("registrar: registry request failing",
			zap.String("owner", owner), zap.String("id", j.id), zap.Stringer("op", j.op),
			zap.Error(err), zap.Int("failures", failures), zap.Duration("retry_in", retry))
	}
	if r.onError != nil {
		r.onError(owner, j.id, err)
	}
}
