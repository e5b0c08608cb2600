package main

import (
	"cmp"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/flyd-dev/flyd/cmd/internal/cli"
	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/specload"
)

// loadSpecs reads the documents of every -f path as apply takes them: the
// values given their variables (the environment, then --env-file or the
// .env beside each path), each workload's env_file read into its env, and
// the workloads selected by --profile (or FLYD_PROFILES). Warnings (a
// variable not set, a profile no workload has) go to stderr; the
// workloads left out by profile are said on stdout, or on stderr with
// --json, where stdout is the results alone.
func loadSpecs(c *cli.Env, files, envFiles, profileFlags []string) (*spec.Documents, error) {
	d, _, err := loadSelected(c, files, envFiles, profileFlags)
	return d, err
}

// loadSelected is loadSpecs, and the names of the workloads the files
// define that the profiles leave out.
func loadSelected(c *cli.Env, files, envFiles, profileFlags []string) (*spec.Documents, []string, error) {
	profiles, err := specload.Profiles(profileFlags, os.Getenv("FLYD_PROFILES"))
	if err != nil {
		return nil, nil, cli.Usagef("%v", err)
	}
	r := specload.Client{
		Environ:  os.Environ(),
		EnvFiles: envFiles,
		Stdin:    os.Stdin,
		Warn:     func(msg string) { fmt.Fprintf(c.Stderr, "warning: %s\n", msg) },
	}
	all := &spec.Documents{}
	for _, f := range files {
		d, err := r.ReadPath(f)
		if err != nil {
			return nil, nil, err
		}
		if err := inProject(d, c.Project); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", f, err)
		}
		all.Add(d)
	}
	sel, err := specload.Select(all, profiles)
	if err != nil {
		return nil, nil, err
	}
	for _, p := range sel.Unused {
		fmt.Fprintf(c.Stderr, "warning: profile %s: no workload has it\n", p)
	}
	var out io.Writer = c.Stdout
	if c.JSON {
		out = c.Stderr
	}
	var left []string
	for _, l := range sel.LeftOut {
		fmt.Fprintf(out, "%s left out: profiles %s not asked for\n", l.Name, strings.Join(l.Profiles, ", "))
		left = append(left, l.Name)
	}
	return all, left, nil
}

// inProject puts the documents read for -p in its project; one that states
// another is refused. Without -p each keeps the project it states.
func inProject(d *spec.Documents, project string) error {
	if project == "" {
		return nil
	}
	return d.SetProject(project)
}

// fullName is a document's name as the daemon keys it.
func fullName(project, name string) string {
	return spec.FullName(cmp.Or(project, spec.ProjectOf(name)), spec.BareName(name))
}
