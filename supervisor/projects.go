package supervisor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/flyd-dev/flyd/authz"
	"github.com/flyd-dev/flyd/driver"
	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/status"
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

// ProjectChange is what Up or Down did to a project: each applied
// workload's outcome, and the full names of what went.
type ProjectChange struct {
	Applied  []Outcome
	Removed  []Outcome // workloads
	Networks []string
	Policies []string
	Volumes  []string
	// Workspaces are the workspace documents removed.
	Workspaces []string
}

// Up makes project what docs say: their networks, workloads (in `after`
// order, as ApplyAll) and policies are applied in it, and the workloads,
// policies and network documents of the project that docs no longer hold
// are removed. Ups and downs of one project are serialized. A document
// that states another project refuses the whole change.
func (s *Supervisor) Up(ctx context.Context, project string, docs Documents, o ApplyOptions) (*ProjectChange, error) {
	if !spec.ValidProject(project) {
		return nil, fmt.Errorf("%w: project %q: a project's name must be a DNS label (lower-case letters, digits and '-')", errdefs.ErrInvalid, project)
	}
	for _, w := range docs.Workloads {
		if err := w.SetProject(project); err != nil {
			return nil, fmt.Errorf("%w: %w", errdefs.ErrInvalid, err)
		}
	}
	for _, n := range docs.Networks {
		if err := n.SetProject(project); err != nil {
			return nil, fmt.Errorf("%w: %w", errdefs.ErrInvalid, err)
		}
	}
	for _, p := range docs.Policies {
		if err := p.SetProject(project); err != nil {
			return nil, fmt.Errorf("%w: %w", errdefs.ErrInvalid, err)
		}
	}
	for _, ws := range docs.Workspaces {
		if err := ws.SetProject(project); err != nil {
			return nil, fmt.Errorf("%w: workspace %s: %w", errdefs.ErrInvalid, ws.Name, err)
		}
	}
	unlock, err := s.lockProject(ctx, project)
	if err != nil {
		return nil, err
	}
	defer unlock()

	out := &ProjectChange{}
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
		keep[spec.KindWorkspace+"/"+spec.FullName(project, spec.BareName(ws.Name))] = true
	}
	for _, n := range docs.Networks {
		if _, err := s.PutNetwork(ctx, n); err != nil {
			return out, fmt.Errorf("network %s: %w", n.Name, err)
		}
		keep[spec.KindNetwork+"/"+spec.FullName(project, spec.BareName(n.Name))] = true
	}
	changes := make([]Change, len(docs.Workloads))
	for i, w := range docs.Workloads {
		changes[i] = Change{Spec: w, Options: o}
		keep[spec.FullName(project, spec.BareName(w.Name))] = true
	}
	if out.Applied, err = s.ApplyAll(ctx, changes); err != nil {
		return out, err
	}
	for _, p := range docs.Policies {
		if _, err := s.PutPolicy(ctx, p); err != nil {
			return out, fmt.Errorf("policy %s: %w", p.Name, err)
		}
		keep[spec.KindPolicy+"/"+spec.FullName(project, spec.BareName(p.Name))] = true
	}
	return out, s.prune(ctx, project, keep, o.Force, out)
}

// Down removes everything of project: its workloads, policies and
// networks (documents and namespaces), and with them their ports,
// carriers, cgroups and logs. A project with nothing is not found.
func (s *Supervisor) Down(ctx context.Context, project string, o RemoveOptions) (*ProjectChange, error) {
	if !spec.ValidProject(project) {
		return nil, fmt.Errorf("%w: project %q: a project's name must be a DNS label", errdefs.ErrInvalid, project)
	}
	unlock, err := s.lockProject(ctx, project)
	if err != nil {
		return nil, err
	}
	defer unlock()
	has := s.hasProject(project)
	if !has && !o.Volumes {
		return nil, fmt.Errorf("%w: no project named %q", errdefs.ErrNotFound, project)
	}
	out := &ProjectChange{}
	if has {
		err = s.prune(ctx, project, nil, o.Force, out)
	}
	if o.Volumes {
		err = errors.Join(err, s.removeVolumes(ctx, project, o.Confined, out))
	}
	if !has && len(out.Volumes) == 0 && err == nil {
		return nil, fmt.Errorf("%w: no project named %q", errdefs.ErrNotFound, project)
	}
	return out, err
}

// removeVolumes removes project's named volumes, once its workloads are
// gone; a runtime keeps one still mounted. They are root's (a confined
// caller runs no containers): a confined caller is refused them.
func (s *Supervisor) removeVolumes(ctx context.Context, project string, confined bool, out *ProjectChange) error {
	var errs []error
	for _, k := range spec.Kinds {
		vr, ok := s.drivers[k].(driver.VolumeRemover)
		if !ok {
			continue
		}
		var names []string
		var err error
		if confined {
			if names, err = vr.Volumes(project); err == nil && len(names) > 0 {
				err = fmt.Errorf("%w: volumes %s are root's: a caller other than root removes none", errdefs.ErrForbidden, strings.Join(names, ", "))
			}
			names = nil
		} else {
			names, err = vr.RemoveVolumes(ctx, project)
		}
		out.Volumes = append(out.Volumes, names...)
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// prune removes what of project keep does not name: workloads by full
// name, networks and policies as KIND/FULLNAME. Workloads go first, in
// parallel, then the policies that guarded them, then the networks they
// left. Every failure is reported; the rest still goes.
func (s *Supervisor) prune(ctx context.Context, project string, keep map[string]bool, force bool, out *ProjectChange) error {
	c := callerOf(ctx)
	var names []string
	for _, w := range s.all() {
		// A kept group keeps its replicas: its apply removed those
		// beyond its count.
		if spec.ProjectOf(w.name) == project && !keep[w.name] && (w.group == "" || !keep[w.group]) {
			names = append(names, w.name)
		}
	}
	// Dependents first: nginx before the app before postgres.
	out.Removed = s.inStopOrder(names, false, func(name string) Outcome {
		return Outcome{Name: name, Err: s.remove(ctx, name, authz.Caller{UID: c.UID, Confined: c.Confined, Force: force})}
	})
	var errs []error
	for _, r := range out.Removed {
		if r.Err != nil {
			errs = append(errs, fmt.Errorf("workload %s: %w", r.Name, r.Err))
		}
	}
	for _, p := range s.net.Policies() {
		if spec.ProjectOf(p.Name) != project || keep[spec.KindPolicy+"/"+p.Name] {
			continue
		}
		if err := s.DeletePolicy(ctx, p.Name); err != nil {
			errs = append(errs, fmt.Errorf("policy %s: %w", p.Name, err))
			continue
		}
		out.Policies = append(out.Policies, p.Name)
	}
	nets, err := s.net.Networks()
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	for _, n := range nets {
		// A network that a kept workload uses stays, with or without
		// a document of its own.
		if spec.ProjectOf(n.Name) != project || keep[spec.KindNetwork+"/"+n.Name] ||
			slices.ContainsFunc(n.Workloads, func(w string) bool { return keep[w] || keep[s.groupOf(w)] }) {
			continue
		}
		if err := s.DeleteNetwork(ctx, n.Name); err != nil {
			errs = append(errs, fmt.Errorf("network %s: %w", n.Name, err))
			continue
		}
		out.Networks = append(out.Networks, n.Name)
	}
	for name := range s.workspaces.all() {
		if spec.ProjectOf(name) != project || keep[spec.KindWorkspace+"/"+name] {
			continue
		}
		if err := s.DeleteWorkspace(ctx, name); err != nil {
			errs = append(errs, fmt.Errorf("workspace %s: %w", name, err))
			continue
		}
		out.Workspaces = append(out.Workspaces, name)
	}
	return errors.Join(errs...)
}

// hasProject says whether anything is of project.
func (s *Supervisor) hasProject(project string) bool {
	for _, w := range s.unsorted() {
		if spec.ProjectOf(w.name) == project {
			return true
		}
	}
	nets, _ := s.net.Networks()
	if slices.ContainsFunc(nets, func(n status.Network) bool { return spec.ProjectOf(n.Name) == project }) {
		return true
	}
	for name := range s.workspaces.all() {
		if spec.ProjectOf(name) == project {
			return true
		}
	}
	return slices.ContainsFunc(s.net.Policies(), func(p status.Policy) bool { return spec.ProjectOf(p.Name) == project })
}

// lockProject holds project's ups and downs apart until unlock: a second
// waits for the first, or for ctx.
func (s *Supervisor) lockProject(ctx context.Context, project string) (unlock func(), err error) {
	s.mu.Lock()
	l := s.projects[project]
	if l == nil {
		l = make(chan struct{}, 1)
		s.projects[project] = l
	}
	s.mu.Unlock()
	select {
	case l <- struct{}{}:
		return func() { <-l }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: project %s is being changed by another up or down: %w", errdefs.ErrConflict, project, ctx.Err())
	}
}
