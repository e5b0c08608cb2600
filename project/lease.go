package project

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/authz"
	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/status"
	"github.com/flyd-dev/flyd/supervisor"
)

// A lease binds a project to the client that made it (flyd run, a Go
// test's flydtest, up --lease): when the client is gone the daemon takes
// the project down, as down does, and says so in an event. A client holds
// its lease with open connections (Hold); once the last one closes the
// lease lapses after its grace, unless a connection comes back in time. A
// lease may instead run to a time (Renew), for a client that holds no
// connection: a CI script's up, renewed while it works.
//
// Leases are recorded in the state journal before they are in force, so a
// daemon restart loses none: a restarted daemon gives each held lease its
// grace again, counted from when it is back (its runs adopted), for the
// client to reconnect; a timed one keeps its time.

// LeaseStore keeps the leases across restarts: the records' journal.
type LeaseStore interface {
	Docs(kind string) map[string][]byte
	PutDoc(kind, name string, record []byte) error
}

// leaseKind is the journal's kind of a lease's record.
const leaseKind = "lease"

// Bounds on a held lease's grace: long enough for a client to reconnect
// across a daemon restart, short enough that a killed CI job's stack is
// gone before the next job wants its place.
const (
	DefaultGrace = 10 * time.Second
	MinGrace     = time.Second
	MaxGrace     = 10 * time.Minute
	// MaxLease bounds a timed lease: a day.
	MaxLease = 24 * time.Hour
	// retryLapse is how long a lapsed lease whose down failed waits
	// before it is tried again.
	retryLapse = 30 * time.Second
)

// LeaseOptions are what a client says of its lease.
type LeaseOptions struct {
	// Grace is how long a held lease outlives its last connection
	// (DefaultGrace when zero).
	Grace time.Duration
	// TTL makes a timed lease: it lapses that long from now, whoever
	// holds it; renewing sets it again. Zero with Renew ends the lease.
	TTL time.Duration
	// Volumes: the down of a lapsed lease removes the project's named
	// volumes too.
	Volumes bool
}

// leaseRecord is a lease as the journal keeps it.
type leaseRecord struct {
	UID      uint32        `json:"uid"`
	Confined bool          `json:"confined,omitempty"`
	Grace    time.Duration `json:"grace"`
	Until    time.Time     `json:"until,omitzero"` // a timed lease's end
	Volumes  bool          `json:"volumes,omitempty"`
}

type lease struct {
	rec     leaseRecord
	holders int
	// due is when the lease lapses, while no one holds it.
	due     time.Time
	timer   *time.Timer
	lapsing bool  // its down is under way
	failed  error // its last down's failure
}

// LeaseStatus is a lease as `flyd down --stale` and the API show it.
type LeaseStatus struct {
	Project string
	UID     uint32
	// Held: a client holds it now. Else Due is when it lapses.
	Held    bool
	Holders int
	Due     time.Time
	Timed   bool
	Error   string // why its last down failed
}

// Leases are the projects' leases of one daemon.
type Leases struct {
	p       *Projects
	store   LeaseStore
	publish func(status.Event)
	log     *zap.Logger

	// mu guards m, closed and every lease's fields; it is held while a
	// lease's change is recorded (store), never while a project is taken
	// down or an event published, and Projects' mu is never taken under
	// it.
	mu     sync.Mutex
	m      map[string]*lease
	closed bool
}

// OpenLeases reads the leases the journal holds and arms each: call it
// once the daemon's runs are adopted, so that no project is taken down
// before its workloads are known. publish tells the events.
func (p *Projects) OpenLeases(store LeaseStore, publish func(status.Event), log *zap.Logger) *Leases {
	l := &Leases{p: p, store: store, publish: publish, log: log, m: map[string]*lease{}}
	now := time.Now()
	// The projects' downs find these leases from the first lapse on.
	p.mu.Lock()
	p.leases = l
	p.mu.Unlock()
	// A lease already due lapses on its timer's goroutine at once, which
	// reads m: it waits for the rest to be read. (Projects' mu is never
	// taken under l.mu.)
	l.mu.Lock()
	for name, b := range store.Docs(leaseKind) {
		var rec leaseRecord
		if err := json.Unmarshal(b, &rec); err != nil || !spec.ValidProject(name) {
			log.Warn("a project's lease record does not read; it is dropped", zap.String("project", name), zap.Error(err))
			_ = store.PutDoc(leaseKind, name, nil)
			continue
		}
		ls := &lease{rec: rec}
		due := now.Add(rec.Grace)
		if !rec.Until.IsZero() {
			due = rec.Until
		}
		l.m[name] = ls
		l.arm(name, ls, due)
	}
	l.mu.Unlock()
	return l
}

// Close disarms every lease: the daemon is going, and the next one arms
// them again. A hold released after Close changes nothing.
func (l *Leases) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	for _, ls := range l.m {
		if ls.timer != nil {
			ls.timer.Stop()
		}
	}
}

// Hold binds project to the caller ctx carries for as long as it holds
// (until release), and Grace after. A project is bound to one caller: a
// hold of another's lease is refused.
func (l *Leases) Hold(ctx context.Context, project string, o LeaseOptions) (release func(), err error) {
	ls, err := l.take(ctx, project, o, func(ls *lease) { ls.holders++ })
	if err != nil {
		return nil, err
	}
	var once sync.Once
	return func() { once.Do(func() { l.let(project, ls) }) }, nil
}

// Renew binds project to the caller until o.TTL from now, or, with a zero
// TTL, ends its lease (the project stays).
func (l *Leases) Renew(ctx context.Context, project string, o LeaseOptions) error {
	if o.TTL <= 0 {
		return l.end(ctx, project)
	}
	if o.TTL > MaxLease {
		return fmt.Errorf("%w: a lease of %s: at most %s", errdefs.ErrInvalid, o.TTL, MaxLease)
	}
	_, err := l.take(ctx, project, o, func(ls *lease) {
		ls.rec.Until = time.Now().Add(o.TTL)
	})
	return err
}

// take makes or finds project's lease for the caller, changes it with f
// and records it, before it is in force.
func (l *Leases) take(ctx context.Context, project string, o LeaseOptions, f func(*lease)) (*lease, error) {
	if !spec.ValidProject(project) || project == "" {
		return nil, fmt.Errorf("%w: project %q: a project's name must be a DNS label", errdefs.ErrInvalid, project)
	}
	grace := o.Grace
	switch {
	case grace == 0:
		grace = DefaultGrace
	case grace < MinGrace || grace > MaxGrace:
		return nil, fmt.Errorf("%w: grace %s: between %s and %s", errdefs.ErrInvalid, grace, MinGrace, MaxGrace)
	}
	c := authz.CallerOf(ctx)
	// A lease takes the project down as its caller: another owner's
	// project is not bound to it (a run of it would end by removing it).
	if err := l.p.oneOwner(ctx, project, c.UID, c.Confined, false); err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, fmt.Errorf("%w: the daemon is stopping", errdefs.ErrUnavailable)
	}
	ls := l.m[project]
	switch {
	case ls == nil:
		ls = &lease{}
	case ls.lapsing:
		return nil, fmt.Errorf("%w: project %s is being taken down: its client went away", errdefs.ErrConflict, project)
	case ls.rec.UID != c.UID:
		return nil, fmt.Errorf("%w: project %s is bound to uid %d's client", errdefs.ErrConflict, project, ls.rec.UID)
	}
	next := *ls
	next.rec = leaseRecord{UID: c.UID, Confined: c.Confined, Grace: grace, Until: ls.rec.Until, Volumes: o.Volumes}
	f(&next)
	if next.rec != ls.rec {
		b, err := json.Marshal(next.rec)
		if err == nil {
			err = l.store.PutDoc(leaseKind, project, b)
		}
		if err != nil {
			return nil, fmt.Errorf("recording project %s's lease: %w", project, err)
		}
	}
	ls.rec, ls.holders, ls.failed = next.rec, next.holders, nil
	l.m[project] = ls
	switch {
	case ls.holders > 0:
		l.disarm(ls)
	case !ls.rec.Until.IsZero():
		l.arm(project, ls, ls.rec.Until)
	}
	return ls, nil
}

// let ends one hold of ls: the last one arms its grace (or its time).
func (l *Leases) let(project string, ls *lease) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || l.m[project] != ls {
		return
	}
	if ls.holders--; ls.holders > 0 {
		return
	}
	due := time.Now().Add(ls.rec.Grace)
	if !ls.rec.Until.IsZero() && ls.rec.Until.After(due) {
		due = ls.rec.Until
	}
	l.arm(project, ls, due)
}

// end removes project's lease, the project left as it is: its owner, or
// root, may.
func (l *Leases) end(ctx context.Context, project string) error {
	c := authz.CallerOf(ctx)
	l.mu.Lock()
	ls := l.m[project]
	l.mu.Unlock()
	if ls == nil {
		return fmt.Errorf("%w: project %s has no lease", errdefs.ErrNotFound, project)
	}
	if c.UID != 0 && c.UID != ls.rec.UID {
		return fmt.Errorf("%w: project %s is bound to uid %d's client", errdefs.ErrForbidden, project, ls.rec.UID)
	}
	return l.forget(project)
}

// forget drops project's lease and its record: the project is down, or
// unbound.
func (l *Leases) forget(project string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	ls := l.m[project]
	if ls == nil {
		return nil
	}
	if err := l.store.PutDoc(leaseKind, project, nil); err != nil {
		return fmt.Errorf("removing project %s's lease: %w", project, err)
	}
	l.disarm(ls)
	delete(l.m, project)
	return nil
}

func (l *Leases) arm(project string, ls *lease, due time.Time) {
	l.disarm(ls)
	ls.due = due
	ls.timer = time.AfterFunc(time.Until(due), func() { l.lapse(project, ls, false) })
}

func (l *Leases) disarm(ls *lease) {
	if ls.timer != nil {
		ls.timer.Stop()
		ls.timer = nil
	}
	ls.due = time.Time{}
}

// lapse takes the project of a lease no one holds down, as its owner, and
// tells it; now does so before its time (down --stale). A down that fails
// keeps the lease, tried again later.
func (l *Leases) lapse(project string, ls *lease, now bool) (*Change, error) {
	l.mu.Lock()
	if l.closed || l.m[project] != ls || ls.holders > 0 || ls.lapsing || !now && time.Now().Before(ls.due) {
		l.mu.Unlock()
		return nil, nil
	}
	ls.lapsing = true
	rec := ls.rec
	l.mu.Unlock()

	ctx := authz.WithCaller(context.Background(), authz.Caller{UID: rec.UID, Confined: rec.Confined})
	ch, err := l.p.Down(ctx, project, supervisor.RemoveOptions{By: rec.UID, Confined: rec.Confined, Volumes: rec.Volumes})
	why := "its client went away"
	if !rec.Until.IsZero() && !time.Now().Before(rec.Until) {
		why = "its lease ran out"
	}
	switch {
	case errors.Is(err, errdefs.ErrNotFound):
		err = l.forget(project)
	case err == nil:
		// Down forgot the lease with the project.
		l.publish(status.Event{Type: status.EventProject, Project: project, Message: "taken down: " + why + what(ch)})
		l.log.Info("project taken down", zap.String("project", project), zap.String("why", why))
	}
	if err != nil {
		l.publish(status.Event{Type: status.EventProject, Project: project, Message: "not taken down (" + why + "): " + err.Error()})
		l.log.Warn("project of a lapsed lease not taken down; tried again", zap.String("project", project), zap.Error(err))
	}
	l.mu.Lock()
	ls.lapsing = false
	if err != nil && l.m[project] == ls {
		ls.failed = err
		if !l.closed {
			l.arm(project, ls, time.Now().Add(retryLapse))
		}
	}
	l.mu.Unlock()
	return ch, err
}

// what says what a down removed, for its event.
func what(ch *Change) string {
	if ch == nil {
		return ""
	}
	var parts []string
	if n := len(ch.Removed); n > 0 {
		parts = append(parts, fmt.Sprintf("%d workloads", n))
	}
	for _, k := range spec.DocKinds() {
		if n := len(ch.Docs[k.Name]); n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, k.Plural))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + " removed)"
}

// List is every lease, by project.
func (l *Leases) List(ctx context.Context) []LeaseStatus {
	c := authz.CallerOf(ctx)
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]LeaseStatus, 0, len(l.m))
	for name, ls := range l.m {
		if c.Confined && ls.rec.UID != c.UID {
			continue
		}
		st := LeaseStatus{Project: name, UID: ls.rec.UID, Held: ls.holders > 0, Holders: ls.holders, Due: ls.due, Timed: !ls.rec.Until.IsZero()}
		if ls.failed != nil {
			st.Error = ls.failed.Error()
		}
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b LeaseStatus) int { return strings.Compare(a.Project, b.Project) })
	return out
}

// Stale takes down now every project whose client is gone: its lease
// held by no one and not running to a time still to come. A confined
// caller's are its own. It answers each project's change by name.
func (l *Leases) Stale(ctx context.Context) (map[string]*Change, error) {
	c := authz.CallerOf(ctx)
	now := time.Now()
	l.mu.Lock()
	type one struct {
		name string
		ls   *lease
	}
	var stale []one
	for name, ls := range l.m {
		if ls.holders > 0 || ls.lapsing || c.UID != 0 && ls.rec.UID != c.UID {
			continue
		}
		if !ls.rec.Until.IsZero() && now.Before(ls.rec.Until) {
			continue
		}
		stale = append(stale, one{name, ls})
	}
	l.mu.Unlock()
	out := map[string]*Change{}
	var errs []error
	for _, s := range stale {
		ch, err := l.lapse(s.name, s.ls, true)
		if err != nil {
			errs = append(errs, fmt.Errorf("project %s: %w", s.name, err))
		}
		out[s.name] = ch
	}
	return out, errors.Join(errs...)
}
