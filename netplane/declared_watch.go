package netplane

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/atomicfile"
	"github.com/flyd-dev/flyd/firewall"
	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/status"
)

// Every refused connection is seen, and cheaply: the kernel counts the
// refusals in the reach tables' refused sets, by cgroup and destination,
// and the daemon reads the counts every reachPoll, rather than taking a
// message per refused SYN (a client retrying in a loop would send
// thousands). What was read is kept in the run dir, so a restarted daemon
// announces what was refused while it was down, and nothing twice.
const (
	reachPoll = time.Second
	// reachRepeat is how often, at most, a pair already announced is
	// announced again with the refusals since.
	reachRepeat = time.Minute
	refusedFile = "reach-refused.json"
)

// refusalBook is what the refusals came to.
type refusalBook struct {
	// mu guards Counts and Pairs (and the refusedPairs in it); it is held
	// while the plane's declared.mu is taken (targetOf), never while the
	// file is written or the events sent.
	mu sync.Mutex
	// Counts are the kernel's counts as last read, by destination key.
	Counts map[string]uint64 `json:"counts"`
	// Pairs are the refusals of each workload to each endpoint.
	Pairs map[string]*refusedPair `json:"pairs"`
}

// refusedPair is the refusals of one workload to one endpoint.
type refusedPair struct {
	From, To string
	Port     int
	Total    uint64
	// Pending are the refusals since the last event, Announced its time.
	Pending   uint64
	Announced time.Time
}

func refusalKey(r firewall.Refusal) string {
	return fmt.Sprintf("%s|%d|%v|%d", r.NS, r.Cgroup, r.Addr, r.Port)
}

// WatchReach reads the refusals every reachPoll until ctx ends, and
// reports each workload's first refusal to each endpoint as an event, and
// later ones as a count at most every reachRepeat.
func (p *Plane) WatchReach(ctx context.Context) {
	if p.fw == nil {
		return
	}
	b := &p.declared.watch
	p.loadRefusals()
	t := time.NewTicker(reachPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			if len(p.fw.ReachNamespaces()) == 0 && !b.pending() {
				continue
			}
			p.readRefusals(now)
		}
	}
}

// readRefusals takes the kernel's counts and says what is new.
func (p *Plane) readRefusals(now time.Time) {
	rs, err := p.fw.Refusals()
	if err != nil {
		p.log.Debug("cannot read every reach table's refusals", zap.Error(err))
	}
	p.noteRefusals(rs, now)
}

// noteRefusals takes counts read at now: each workload's first refusal to
// an endpoint is an event at once, later ones a count at most every
// reachRepeat; a count lower than the last read began again (its table
// was made again).
func (p *Plane) noteRefusals(rs []firewall.Refusal, now time.Time) {
	b := &p.declared.watch
	var events []status.Event
	b.mu.Lock()
	if b.Counts == nil {
		b.Counts, b.Pairs = map[string]uint64{}, map[string]*refusedPair{}
	}
	changed := false
	for _, r := range rs {
		k := refusalKey(r)
		prev := b.Counts[k]
		if r.Count < prev {
			prev = 0 // the table was made again: its counts began again
		}
		if r.Count == prev {
			continue
		}
		b.Counts[k], changed = r.Count, true
		from, to, ok := p.targetOf(r)
		if !ok {
			continue // a destination no endpoint is any more
		}
		pk := from + "|" + to.Workload + "/" + to.Endpoint
		pr := b.Pairs[pk]
		if pr == nil {
			pr = &refusedPair{From: from, To: to.Workload + "/" + to.Endpoint, Port: r.Port}
			b.Pairs[pk] = pr
		}
		pr.Total += r.Count - prev
		pr.Pending += r.Count - prev
	}
	for _, k := range slices.Sorted(maps.Keys(b.Pairs)) {
		pr := b.Pairs[k]
		switch {
		case pr.Pending == 0:
		case pr.Announced.IsZero():
			events = append(events, reachEvent(pr, fmt.Sprintf("undeclared dependency: %s → %s (%d)", pr.From, pr.To, pr.Port)))
		case now.Sub(pr.Announced) >= reachRepeat:
			events = append(events, reachEvent(pr, fmt.Sprintf("undeclared dependency: %s → %s (%d): refused %d more times", pr.From, pr.To, pr.Port, pr.Pending)))
		default:
			continue
		}
		pr.Pending, pr.Announced, changed = 0, now, true
	}
	var data []byte
	if changed {
		data, _ = json.Marshal(b)
	}
	b.mu.Unlock()
	if data != nil {
		if err := atomicfile.Write(filepath.Join(p.cfg.RunDir, refusedFile), data, 0o600); err != nil {
			p.log.Warn("cannot record the refusals read", zap.Error(err))
		}
	}
	for _, ev := range events {
		p.log.Info(ev.Message, zap.String("workload", ev.Workload))
		if p.cfg.Event != nil {
			p.cfg.Event(ev)
		}
	}
}

func reachEvent(pr *refusedPair, msg string) status.Event {
	return status.Event{Type: status.EventReach, Workload: pr.From, Project: spec.ProjectOf(pr.From), Message: msg}
}

// pending says whether refusals wait to be announced.
func (b *refusalBook) pending() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, pr := range b.Pairs {
		if pr.Pending > 0 {
			return true
		}
	}
	return false
}

// loadRefusals takes up what an earlier daemon read.
func (p *Plane) loadRefusals() {
	b := &p.declared.watch
	data, err := os.ReadFile(filepath.Join(p.cfg.RunDir, refusedFile))
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err == nil {
		err = json.Unmarshal(data, b)
	}
	if err != nil {
		p.log.Warn("cannot read the refusals an earlier daemon read: the refusals counted so far are announced again", zap.Error(err))
		b.Counts, b.Pairs = nil, nil
	}
}

// byTarget are the refusals by endpoint (WORKLOAD/ENDPOINT), each
// workload's total.
func (b *refusalBook) byTarget() map[string][]status.ReachRefused {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[string][]status.ReachRefused{}
	for _, k := range slices.Sorted(maps.Keys(b.Pairs)) {
		pr := b.Pairs[k]
		out[pr.To] = append(out[pr.To], status.ReachRefused{Workload: pr.From, Count: pr.Total})
	}
	for _, rs := range out {
		slices.SortFunc(rs, func(a, b status.ReachRefused) int { return strings.Compare(a.Workload, b.Workload) })
	}
	return out
}
