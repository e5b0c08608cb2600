// Package project makes a project what its files say, above the
// supervisor: an up applies a project's documents of every kind (in their
// rank order: workspaces, networks, policies), then its workloads (in
// `after` order), then removes what of the project the files no longer
// hold; a down removes everything of it, and its named volumes
// when asked. One project's ups and downs are held apart. A project may
// be bound to the client that made it (Leases): held by its connections
// or leased to a time, recorded in the journal, and taken down once its
// lease lapses.
//
// It drives the supervisor only through its exported commands, with the
// caller the context carries (authz.WithCaller). What a workload is,
// how it runs and who may change it are the supervisor's, not this
// package's.
package project

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/flyd-dev/flyd/documents"
	"github.com/flyd-dev/flyd/driver"
	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/supervisor"
)

// Documents are the documents of one project, as its files say.
type Documents struct {
	Workloads []*spec.Workload
	// Docs are the documents of the other kinds (spec.DocKinds).
	Docs []spec.Document
	// Keep names (bare or full) workloads of the project that Up leaves as
	// they are: those the files define but their profiles leave out.
	Keep []string
}

// Change is what Up or Down did to a project: each applied workload's
// outcome, and the full names of what went.
type Change struct {
	Applied []supervisor.Outcome
	Removed []supervisor.Outcome // workloads
	// Docs are the documents removed: kind → full names.
	Docs    map[string][]string
	Volumes []string
}

// Runtimes are what an up and a down ask of the daemon's runtimes
// (driver.Runtimes): whether a kind's workloads can start now, and the
// named volumes they keep beyond their runs.
type Runtimes interface {
	driver.VolumeRemover
	Available(ctx context.Context, k spec.Kind) error
}

// Projects ups and downs the projects of one supervisor.
type Projects struct {
	s    *supervisor.Supervisor
	docs *documents.Documents
	// runtimes are the daemon's (driver.Runtimes): whether a kind's
	// workloads can start now, for an up's check, and the named volumes
	// they keep beyond their runs, for a down with its volumes.
	runtimes Runtimes

	// mu guards locks and leases, and nothing is taken while it is held:
	// a project's own lock (a one-slot channel of locks) is waited for
	// after mu is let go.
	mu sync.Mutex
	// locks serialize each project's ups and downs (lock).
	locks map[string]chan struct{}
	// leases bind projects to their clients (OpenLeases); nil until the
	// daemon opens them.
	leases *Leases
}

// New has the projects of s and docs upped and downed through it, their
// named volumes those of volumes; a daemon has one, so that one project's
// ups and downs are held apart.
func New(s *supervisor.Supervisor, docs *documents.Documents, runtimes Runtimes) *Projects {
	return &Projects{s: s, docs: docs, runtimes: runtimes, locks: map[string]chan struct{}{}}
}

// Up makes project what docs say: their documents, kind by kind in
// rank order (spec.DocKinds), then their workloads (in `after` order, as
// ApplyAll) are applied in it, and the workloads and documents of the
// project that docs no longer hold are removed. A document that states
// another project refuses the whole change.
func (p *Projects) Up(ctx context.Context, project string, docs Documents, o supervisor.ApplyOptions) (*Change, error) {
	if !spec.ValidProject(project) {
		return nil, fmt.Errorf("%w: project %q: a project's name must be a DNS label (lower-case letters, digits and '-')", errdefs.ErrInvalid, project)
	}
	d := spec.Documents{Workloads: docs.Workloads, Docs: docs.Docs}
	if err := d.SetProject(project); err != nil {
		return nil, fmt.Errorf("%w: %w", errdefs.ErrInvalid, err)
	}
	unlock, err := p.lock(ctx, project)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := p.oneOwner(ctx, project, o.By, o.Confined, false); err != nil {
		return nil, fmt.Errorf("%w; nothing was made", err)
	}
	if err := p.check(ctx, project, docs.Workloads, o.Start); err != nil {
		return nil, err
	}
	before := p.contents(ctx, project)
	out, err := p.up(ctx, project, docs, o)
	if err != nil {
		return p.undo(ctx, project, before, out, err)
	}
	return out, nil
}

// up applies docs in project and prunes what they no longer hold.
func (p *Projects) up(ctx context.Context, project string, docs Documents, o supervisor.ApplyOptions) (*Change, error) {
	var err error
	out := &Change{}
	keep := map[string]bool{}
	for _, n := range docs.Keep {
		keep[spec.FullName(project, spec.BareName(n))] = true
	}
	// Documents first, so that a workload's first run has its network's
	// settings, its workspace's configurations and its policies in force.
	for _, k := range spec.DocKinds() {
		for _, doc := range docs.Docs {
			if doc.DocKind() != k.Name {
				continue
			}
			if _, err := p.docs.Put(ctx, doc); err != nil {
				return out, fmt.Errorf("%s %s: %w", k.Name, doc.DocName(), err)
			}
			keep[docKey(k.Name, project, doc.DocName())] = true
		}
	}
	changes := make([]supervisor.Change, len(docs.Workloads))
	for i, w := range docs.Workloads {
		changes[i] = supervisor.Change{Spec: w, Options: o}
		keep[spec.FullName(project, spec.BareName(w.Name))] = true
	}
	if out.Applied, err = p.s.ApplyAll(ctx, changes); err != nil {
		return out, err
	}
	var refused []error
	for _, a := range out.Applied {
		if a.Err != nil {
			refused = append(refused, fmt.Errorf("workload %s: %w", a.Name, a.Err))
		}
	}
	if len(refused) > 0 {
		return out, errors.Join(refused...)
	}
	return out, p.prune(ctx, project, keep, o.Force, out)
}

// check refuses an up before anything of it is made: a name twice, a
// cycle in `after`, an `after` or `uses` that names no workload of the
// project (in the files, or applied and kept by them).
func (p *Projects) check(ctx context.Context, project string, ws []*spec.Workload, start bool) error {
	specs := make([]*spec.Workload, len(ws))
	have := map[string]bool{}
	for i, w := range ws {
		specs[i] = w.Clone()
		specs[i].Qualify()
		have[specs[i].Name] = true
	}
	if _, err := spec.OrderBatch(specs); err != nil {
		return err
	}
	for _, w := range p.s.List(ctx) {
		if spec.ProjectOf(w.Name) == project {
			have[w.Name] = true
			if w.Group != "" {
				have[w.Group] = true
			}
		}
	}
	var errs []error
	for _, w := range specs {
		if start && !w.Disabled {
			if err := p.runtimes.Available(ctx, cmp.Or(w.Kind, spec.KindNative)); err != nil {
				errs = append(errs, fmt.Errorf("workload %s: %w", spec.BareName(w.Name), err))
			}
		}
		for i, dep := range spec.AfterNames(w.After) {
			if !have[dep] {
				errs = append(errs, fmt.Errorf("workload %s: after[%d]: %q names no workload of project %s", spec.BareName(w.Name), i, spec.BareName(dep), project))
			}
		}
		for i, u := range w.Uses {
			if dep, _ := spec.ParseUse(u); !have[dep] {
				errs = append(errs, fmt.Errorf("workload %s: uses[%d]: %q names no workload of project %s", spec.BareName(w.Name), i, spec.BareName(dep), project))
			}
		}
	}
	if len(errs) == 0 {
		return nil
	}
	err := errors.Join(errs...)
	if !errors.Is(err, errdefs.ErrRuntimeUnavailable) {
		err = fmt.Errorf("%w: %w", errdefs.ErrInvalid, err)
	}
	return fmt.Errorf("%w; nothing was made", err)
}

// oneOwner refuses the caller (uid by, confined or not) a project that holds another owner's
// workload, under --peer-users (with callers root's equals, every project
// is everyone's). A project is one owner's: an up by another would
// replace its workloads, remove those its files do not name, and give its
// one-shot run (flyd run) the use of them. Root may take any project down
// (down is true), as it may remove any workload; a peer takes down its
// own alone.
func (p *Projects) oneOwner(ctx context.Context, project string, by uint32, confined, down bool) error {
	if !p.s.PeerLanes() || down && !confined {
		return nil
	}
	for _, w := range p.s.List(ctx) {
		if spec.ProjectOf(w.Name) != project || w.AppliedBy == by {
			continue
		}
		if confined {
			// A peer is not told what another's project holds.
			return fmt.Errorf("%w: project %s holds workloads of another user: a project is one owner's; name another", errdefs.ErrForbidden, project)
		}
		return fmt.Errorf("%w: project %s holds workload %s of uid %d: a project is one owner's under --peer-users; its owner takes it down, or root with flyd down -p %s", errdefs.ErrForbidden, project, spec.BareName(w.Name), w.AppliedBy, project)
	}
	return nil
}

// contents are the keys of what project holds: workloads by full name,
// other documents by docKey.
func (p *Projects) contents(ctx context.Context, project string) map[string]bool {
	out := map[string]bool{}
	for _, w := range p.s.List(ctx) {
		if spec.ProjectOf(w.Name) == project {
			out[w.Name] = true
		}
	}
	for _, k := range spec.DocKinds() {
		names, _, _ := p.docs.Names(ctx, k.Name)
		for _, n := range names {
			if spec.ProjectOf(n) == project {
				out[documents.Key(k.Name, n)] = true
			}
		}
	}
	return out
}

// undo removes what a failed up made that the project did not hold
// before it (before: contents'), so that a failed up leaves nothing new:
// its error says what failed, and what was taken away again. What it
// replaced stays as the up left it.
func (p *Projects) undo(ctx context.Context, project string, before map[string]bool, out *Change, failed error) (*Change, error) {
	// On a context of its own: a client that went away leaves nothing
	// either.
	ctx = context.WithoutCancel(ctx)
	keep := p.contents(ctx, project)
	made := 0
	for k := range keep {
		if !before[k] {
			delete(keep, k)
			made++
		}
	}
	if made == 0 {
		return out, fmt.Errorf("%w; nothing was made", failed)
	}
	var undone Change
	err := p.prune(ctx, project, keep, true, &undone)
	if out == nil {
		out = &Change{}
	}
	// What was applied and then removed again is reported removed.
	out.Removed = append(out.Removed, undone.Removed...)
	for k, names := range undone.Docs {
		if out.Docs == nil {
			out.Docs = map[string][]string{}
		}
		out.Docs[k] = append(out.Docs[k], names...)
	}
	if err != nil {
		return out, fmt.Errorf("%w; removing what this up made failed too: %w", failed, err)
	}
	return out, fmt.Errorf("%w; what this up made was removed again", failed)
}

// docKey names a document of project in a keep set: KIND/FULLNAME.
func docKey(kind, project, name string) string {
	return documents.Key(kind, spec.FullName(project, spec.BareName(name)))
}

// Down removes everything of project: its workloads and its documents of
// every kind (a network's namespace with its document), and with them their ports,
// carriers, cgroups and logs; with o.Volumes, its named volumes too. A
// project with nothing is not found.
func (p *Projects) Down(ctx context.Context, project string, o supervisor.RemoveOptions) (*Change, error) {
	if !spec.ValidProject(project) {
		return nil, fmt.Errorf("%w: project %q: a project's name must be a DNS label", errdefs.ErrInvalid, project)
	}
	unlock, err := p.lock(ctx, project)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := p.oneOwner(ctx, project, o.By, o.Confined, true); err != nil {
		return nil, fmt.Errorf("%w; nothing was removed", err)
	}
	has := p.has(ctx, project)
	if !has && !o.Volumes {
		return nil, fmt.Errorf("%w: no project named %q", errdefs.ErrNotFound, project)
	}
	out := &Change{}
	if has {
		err = p.prune(ctx, project, nil, o.Force, out)
	}
	if o.Volumes {
		err = errors.Join(err, p.removeVolumes(ctx, project, o.Confined, out))
	}
	if !has && len(out.Volumes) == 0 && err == nil {
		return nil, fmt.Errorf("%w: no project named %q", errdefs.ErrNotFound, project)
	}
	// A project gone whole is bound to no client any more.
	if l := p.leasesOf(); l != nil && !p.has(ctx, project) {
		err = errors.Join(err, l.forget(project))
	}
	return out, err
}

func (p *Projects) leasesOf() *Leases {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.leases
}

// removeVolumes removes project's named volumes, once its workloads are
// gone. They are root's (a confined caller runs no containers): a
// confined caller is refused them.
func (p *Projects) removeVolumes(ctx context.Context, project string, confined bool, out *Change) error {
	if confined {
		names, err := p.runtimes.Volumes(project)
		if err == nil && len(names) > 0 {
			err = fmt.Errorf("%w: volumes %s are root's: a caller other than root removes none", errdefs.ErrForbidden, strings.Join(names, ", "))
		}
		return err
	}
	names, err := p.runtimes.RemoveVolumes(ctx, project)
	out.Volumes = append(out.Volumes, names...)
	return err
}

// prune removes what of project keep does not name: workloads by full
// name, other documents by docKey. Workloads go first, dependents before
// what they depend on, then the documents, kind by kind in the reverse of
// their rank (the policies that guarded the workloads, the networks they
// left, the workspaces); a document a kept workload holds (its network)
// stays. Every failure is reported; the rest still goes.
func (p *Projects) prune(ctx context.Context, project string, keep map[string]bool, force bool, out *Change) error {
	s := p.s
	var names []string
	groups := map[string]string{}
	for _, w := range s.List(ctx) {
		groups[w.Name] = w.Group
		// A kept group keeps its replicas: its apply removed those
		// beyond its count.
		if spec.ProjectOf(w.Name) == project && !keep[w.Name] && (w.Group == "" || !keep[w.Group]) {
			names = append(names, w.Name)
		}
	}
	var errs []error
	if len(names) > 0 {
		// Dependents first: nginx before the app before postgres.
		removed, err := s.Batch(ctx, supervisor.ActionRemove, supervisor.BatchRequest{Names: names, Force: force})
		if err != nil {
			return err
		}
		out.Removed = removed
	}
	for _, r := range out.Removed {
		if r.Err != nil {
			errs = append(errs, fmt.Errorf("workload %s: %w", r.Name, r.Err))
		}
	}
	kept := func(w string) bool { return keep[w] || groups[w] != "" && keep[groups[w]] }
	kinds := spec.DocKinds()
	slices.Reverse(kinds)
	for _, k := range kinds {
		names, held, err := p.docs.Names(ctx, k.Name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, name := range names {
			if spec.ProjectOf(name) != project || keep[documents.Key(k.Name, name)] || slices.ContainsFunc(held[name], kept) {
				continue
			}
			if err := p.docs.Delete(ctx, k.Name, name); err != nil {
				errs = append(errs, fmt.Errorf("%s %s: %w", k.Name, name, err))
				continue
			}
			if out.Docs == nil {
				out.Docs = map[string][]string{}
			}
			out.Docs[k.Name] = append(out.Docs[k.Name], name)
		}
	}
	return errors.Join(errs...)
}

// has says whether anything is of project.
func (p *Projects) has(ctx context.Context, project string) bool {
	return len(p.contents(ctx, project)) > 0
}

// lock holds project's ups and downs apart until unlock: a second waits
// for the first, or for ctx.
func (p *Projects) lock(ctx context.Context, project string) (unlock func(), err error) {
	p.mu.Lock()
	l := p.locks[project]
	if l == nil {
		l = make(chan struct{}, 1)
		p.locks[project] = l
	}
	p.mu.Unlock()
	select {
	case l <- struct{}{}:
		return func() { <-l }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: project %s is being changed by another up or down: %w", errdefs.ErrConflict, project, ctx.Err())
	}
}
