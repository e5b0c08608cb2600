package spec

import (
	"fmt"
	"strings"

	"github.com/flyd-dev/flyd/internal/dnslabel"
)

// A project holds copies of the same names apart: every document (a
// workload, a network, a policy) belongs to one, and its full name is
// PROJECT.NAME. The default project has no name, and its documents keep
// their bare names, as before projects. Names within a document resolve
// within its project: `network: db`, `after: [pg]` and `uses: [pg]` of a
// workload of project ci-7 mean ci-7.db and ci-7.pg. A DNS label has no
// dot, so a full name is never a bare name of another project.
//
// The daemon keys everything (state, logs, cgroups, namespaces, rules)
// on full names, made once where a document comes in (Qualify); what is
// below never knows of projects.

// ProjectSep joins a project and a name.
const ProjectSep = "."

// FullName is name in project ("" for the default project).
func FullName(project, name string) string {
	if project == "" {
		return name
	}
	return project + ProjectSep + name
}

// SplitName splits a full name into its project ("" for the default) and
// its bare name.
func SplitName(full string) (project, name string) {
	if p, n, ok := strings.Cut(full, ProjectSep); ok {
		return p, n
	}
	return "", full
}

// BareName is a full name without its project.
func BareName(full string) string {
	_, n := SplitName(full)
	return n
}

// ProjectOf is the project of a full name.
func ProjectOf(full string) string {
	p, _ := SplitName(full)
	return p
}

// ValidProject says whether s can name a project: a DNS label.
func ValidProject(s string) bool { return validName(s) }

// validFull reports whether s is a name or PROJECT.NAME, each a DNS label.
func validFull(s string) bool { return dnslabel.ValidFull(s) }

// inProject qualifies a bare name with project; a full name stays.
func inProject(project, name string) string {
	if project == "" || strings.Contains(name, ProjectSep) {
		return name
	}
	return FullName(project, name)
}

// projectOf is the project a workload belongs to: the one it states, or
// its name's.
func (w *Workload) projectOf() string {
	if w.Project != "" {
		return w.Project
	}
	return ProjectOf(w.Name)
}

// validateProject checks that a workload stays in its project: the
// project it states is its name's, and what it names (its network, its
// `after` and `uses`) is of it.
func (w *Workload) validateProject(p *problems) {
	project := w.projectOf()
	if w.Project != "" && !ValidProject(w.Project) {
		p.add("project", "must be %s", nameRule)
	}
	if np := ProjectOf(w.Name); np != "" && np != project {
		p.add("name", "is of project %q, and the workload states project %q", np, project)
	}
	other := func(field, name string) {
		if q := ProjectOf(name); q != "" && q != project {
			p.add(field, "%q is of project %q: a workload's names resolve within its own project (%q)", name, q, project)
		}
	}
	if w.Network != NetworkHost {
		other("network", w.Network)
	}
	for i, e := range w.After {
		n, _ := ParseAfter(e)
		other(indexPath("after", i), n)
	}
	for i, e := range w.Uses {
		n, _ := ParseUse(e)
		other(indexPath("uses", i), n)
	}
}

// Qualify makes a valid workload's names full: its own, its network's (the
// host's is every project's) and those its `after` and `uses` name, and
// states its project. A workload of the default project is unchanged.
func (w *Workload) Qualify() {
	project := w.projectOf()
	if project == "" {
		return
	}
	w.Project = project
	w.Name = inProject(project, w.Name)
	if w.Network != NetworkHost {
		w.Network = inProject(project, w.Network)
	}
	for i, e := range w.After {
		n, cond := ParseAfter(e)
		w.After[i] = inProject(project, n)
		if strings.Contains(e, ":") {
			w.After[i] += ":" + cond
		}
		if Follows(e) {
			w.After[i] += AfterFollows
		}
	}
	for i, e := range w.Uses {
		n, ep := ParseUse(e)
		w.Uses[i] = inProject(project, n)
		if ep != "" {
			w.Uses[i] += "/" + ep
		}
	}
}

// SetProject puts a document read for project (`-p`) in it: one that
// states another project, by its `project` or its name, is refused.
func (w *Workload) SetProject(project string) error {
	if err := setProject(&w.Project, w.Name, project); err != nil {
		return fmt.Errorf("workload %s: %w", w.Name, err)
	}
	return nil
}

func setProject(stated *string, name, project string) error {
	have := *stated
	if have == "" {
		have = ProjectOf(name)
	}
	if have != "" && have != project {
		return fmt.Errorf("it is of project %q, not %q", have, project)
	}
	*stated = project
	return nil
}

// validateDocProject checks a document's stated project against its name.
func validateDocProject(p *problems, stated, name string) {
	if stated != "" && !ValidProject(stated) {
		p.add("project", "must be %s", nameRule)
	}
	if np := ProjectOf(name); np != "" && stated != "" && np != stated {
		p.add("name", "is of project %q, and the document states project %q", np, stated)
	}
}
