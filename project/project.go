// Package project makes a project what its files say, above the
// supervisor: an up applies a project's workspaces, networks, workloads (in
// `after` order) and policies, then removes what of the project the files
// no longer hold; a down removes everything of it, and its named volumes
// when asked. One project's ups and downs are held apart.
//
// It drives the supervisor only through its exported commands, with the
// caller the context carries (authz.WithCaller). What a workload is,
// how it runs and who may change it are the supervisor's, not this
// package's.
package project

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/flyd-dev/flyd/documents"
	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/status"
	"github.com/flyd-dev/flyd/supervisor"
)

// Documents are the documents of one project, as its files say.
type Documents struct {
	Workloads  []*spec.Workload
	Networks   []*spec.Network
	Policies   []*spec.Policy
	Workspaces []*spec.Workspace
	// Keep names (bare or full) workloads of the project that Up leaves as
	// they are: those the files define but their profiles leave out.
	Keep []string
}

// Change is what Up or Down did to a project: each applied workload's
// outcome, and the full names of what went.
type Change struct {
	Applied  []supervisor.Outcome
	Removed  []supervisor.Outcome // workloads
	Networks []string
	Policies []string
	Volumes  []string
	// Workspaces are the workspace documents removed.
	Workspaces []string
}

// Projects ups and downs the projects of one supervisor.
type Projects struct {
	s    *supervisor.Supervisor
	docs *documents.Documents

	mu sync.Mutex
	// locks serialize each project's ups and downs (lock).
	locks map[string]chan struct{}
}

// New has the projects of s and docs upped and downed through it; a
// daemon has one, so that one project's ups and downs are held apart.
func New(s *supervisor.Supervisor, docs *documents.Documents) *Projects {
	return &Projects{s: s, docs: docs, locks: map[string]chan struct{}{}}
}

// Up makes project what docs say: their workspaces, networks, workloads
// (in `after` order, as ApplyAll) and policies are applied in it, and the
// workloads, policies, network and workspace documents of the project that
// docs no longer hold are removed. A document that states another project
// refuses the whole change.
func (p *Projects) Up(ctx context.Context, project string, docs Documents, o supervisor.ApplyOptions) (*Change, error) {
	if !spec.ValidProject(project) {
		return nil, fmt.Errorf("%w: project %q: a project's name must be a DNS label (lower-case letters, digits and '-')", errdefs.ErrInvalid, project)
	}
	if err := setProject(project, docs); err != nil {
		return nil, err
	}
	unlock, err := p.lock(ctx, project)
	if err != nil {
		return nil, err
	}
	defer unlock()

	s := p.s
	out := &Change{}
	keep := map[string]bool{}
	for _, n := range docs.Keep {
		keep[spec.FullName(project, spec.BareName(n))] = true
	}
	// Workspaces first: their configurations reach the workloads' first
	// runs.
	for _, ws := range docs.Workspaces {
		if _, err := s.PutWorkspace(ctx, ws); err != nil {
			return out, fmt.Errorf("workspace %s: %w", ws.Name, err)
		}
		keep[docKey(spec.KindWorkspace, project, ws.Name)] = true
	}
	for _, n := range docs.Networks {
		if _, err := p.docs.PutNetwork(ctx, n); err != nil {
			return out, fmt.Errorf("network %s: %w", n.Name, err)
		}
		keep[docKey(spec.KindNetwork, project, n.Name)] = true
	}
	changes := make([]supervisor.Change, len(docs.Workloads))
	for i, w := range docs.Workloads {
		changes[i] = supervisor.Change{Spec: w, Options: o}
		keep[spec.FullName(project, spec.BareName(w.Name))] = true
	}
	if out.Applied, err = s.ApplyAll(ctx, changes); err != nil {
		return out, err
	}
	for _, pol := range docs.Policies {
		if _, err := p.docs.PutPolicy(ctx, pol); err != nil {
			return out, fmt.Errorf("policy %s: %w", pol.Name, err)
		}
		keep[docKey(spec.KindPolicy, project, pol.Name)] = true
	}
	return out, p.prune(ctx, project, keep, o.Force, out)
}

// setProject puts every document of docs in project, or says which
// states another.
func setProject(project string, docs Documents) error {
	for _, w := range docs.Workloads {
		if err := w.SetProject(project); err != nil {
			return fmt.Errorf("%w: %w", errdefs.ErrInvalid, err)
		}
	}
	for _, n := range docs.Networks {
		if err := n.SetProject(project); err != nil {
			return fmt.Errorf("%w: %w", errdefs.ErrInvalid, err)
		}
	}
	for _, pol := range docs.Policies {
		if err := pol.SetProject(project); err != nil {
			return fmt.Errorf("%w: %w", errdefs.ErrInvalid, err)
		}
	}
	for _, ws := range docs.Workspaces {
		if err := ws.SetProject(project); err != nil {
			return fmt.Errorf("%w: workspace %s: %w", errdefs.ErrInvalid, ws.Name, err)
		}
	}
	return nil
}

// docKey names a document of project in a keep set: KIND/FULLNAME.
func docKey(kind, project, name string) string {
	return documents.Key(kind, spec.FullName(project, spec.BareName(name)))
}

// Down removes everything of project: its workloads, policies, networks
// (documents and namespaces) and workspaces, and with them their ports,
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
	return out, err
}

// removeVolumes removes project's named volumes, once its workloads are
// gone. They are root's (a confined caller runs no containers): a
// confined caller is refused them.
func (p *Projects) removeVolumes(ctx context.Context, project string, confined bool, out *Change) error {
	if confined {
		names, err := p.s.Volumes(project)
		if err == nil && len(names) > 0 {
			err = fmt.Errorf("%w: volumes %s are root's: a caller other than root removes none", errdefs.ErrForbidden, strings.Join(names, ", "))
		}
		return err
	}
	names, err := p.s.RemoveVolumes(ctx, project)
	out.Volumes = append(out.Volumes, names...)
	return err
}

// prune removes what of project keep does not name: workloads by full
// name, other documents by docKey. Workloads go first, dependents before
// what they depend on, then the policies that guarded them, the networks
// they left and the workspaces. Every failure is reported; the rest still
// goes.
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
	for _, pol := range p.docs.Policies(ctx) {
		if spec.ProjectOf(pol.Name) != project || keep[documents.Key(spec.KindPolicy, pol.Name)] {
			continue
		}
		if err := p.docs.DeletePolicy(ctx, pol.Name); err != nil {
			errs = append(errs, fmt.Errorf("policy %s: %w", pol.Name, err))
			continue
		}
		out.Policies = append(out.Policies, pol.Name)
	}
	nets, err := p.docs.Networks(ctx)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	for _, n := range nets {
		// A network that a kept workload uses stays, with or without
		// a document of its own.
		if spec.ProjectOf(n.Name) != project || keep[documents.Key(spec.KindNetwork, n.Name)] ||
			slices.ContainsFunc(n.Workloads, func(w string) bool { return keep[w] || groups[w] != "" && keep[groups[w]] }) {
			continue
		}
		if err := p.docs.DeleteNetwork(ctx, n.Name); err != nil {
			errs = append(errs, fmt.Errorf("network %s: %w", n.Name, err))
			continue
		}
		out.Networks = append(out.Networks, n.Name)
	}
	for _, ws := range s.Workspaces(ctx) {
		if spec.ProjectOf(ws.Name) != project || keep[documents.Key(spec.KindWorkspace, ws.Name)] {
			continue
		}
		if err := s.DeleteWorkspace(ctx, ws.Name); err != nil {
			errs = append(errs, fmt.Errorf("workspace %s: %w", ws.Name, err))
			continue
		}
		out.Workspaces = append(out.Workspaces, ws.Name)
	}
	return errors.Join(errs...)
}

// has says whether anything is of project.
func (p *Projects) has(ctx context.Context, project string) bool {
	of := func(name string) bool { return spec.ProjectOf(name) == project }
	s := p.s
	if slices.ContainsFunc(s.List(ctx), func(w status.Workload) bool { return of(w.Name) }) {
		return true
	}
	nets, _ := p.docs.Networks(ctx)
	return slices.ContainsFunc(nets, func(n status.Network) bool { return of(n.Name) }) ||
		slices.ContainsFunc(s.Workspaces(ctx), func(ws spec.Workspace) bool { return of(ws.Name) }) ||
		slices.ContainsFunc(p.docs.Policies(ctx), func(pol status.Policy) bool { return of(pol.Name) })
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
