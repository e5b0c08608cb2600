package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"

	"github.com/flyd-dev/flyd/api"
	"github.com/flyd-dev/flyd/cmd/internal/cli"
	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/specload"
)

// loadSpecs reads the documents of every -f path as apply takes them: the
// values given their variables (the environment, then --env-file or the
// .env beside each path), each workload's env_file read into its env, a
// later path's document changing an earlier one's of its kind and name
// (specload.ReadPaths), and the workloads selected by --profile (or
// FLYD_PROFILES). Warnings (a
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
	composeFiles := ""
	for _, g := range flydTogether(composeGroups(files)) {
		var d *spec.Documents
		if g.compose != nil {
			p, err := loadCompose(c, g.compose, envFiles)
			if err != nil {
				return nil, nil, err
			}
			d = &spec.Documents{Workloads: p.Documents.Workloads, Docs: p.Documents.Docs}
			composeFiles = g.name()
		} else if composeFiles != "" {
			// After compose's: a workload of these files changes the
			// service of its name, as an override file would.
			if all, err = r.ReadPathsOver(all, composeFiles, g.paths); err != nil {
				return nil, nil, err
			}
			if err := inProject(all, c.Project); err != nil {
				return nil, nil, fmt.Errorf("%s: %w", g.name(), err)
			}
			continue
		} else if d, err = r.ReadPaths(g.paths); err != nil {
			return nil, nil, err
		}
		if err := inProject(d, c.Project); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", g.name(), err)
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

// fileGroup is what one or more -f name: a spec file or directory of
// flyd's, or compose files, which are read together, merged in their
// order as `docker compose -f a -f b` merges them.
type fileGroup struct {
	paths   []string
	compose []string
}

func (g fileGroup) name() string {
	if g.compose != nil {
		return strings.Join(g.compose, ", ")
	}
	return strings.Join(g.paths, ", ")
}

// flydTogether puts the paths of flyd's own groups in one, where the
// first of them is: they are read together, a later one's document
// changing an earlier one's of its kind and name (specload.ReadPaths).
func flydTogether(groups []fileGroup) []fileGroup {
	var out []fileGroup
	at := -1
	for _, g := range groups {
		switch {
		case g.compose != nil:
			out = append(out, g)
		case at < 0:
			at = len(out)
			out = append(out, g)
		default:
			out[at].paths = append(out[at].paths, g.paths...)
		}
	}
	return out
}

// composeGroups sorts the -f paths: a compose file (by its name, or
// `services:` at its top level) or a directory holding one (with its
// compose.override.yaml, as docker compose reads it) joins the compose
// files before it; any other is flyd's, read as apply reads it.
func composeGroups(files []string) []fileGroup {
	var out []fileGroup
	var cf []string
	for _, f := range files {
		var these []string
		if f != "-" {
			if fi, err := os.Stat(f); err == nil && fi.IsDir() {
				these = specload.ComposeFilesIn(f)
			} else if err == nil && specload.IsComposeFile(f) {
				these = []string{f}
			}
		}
		if these == nil {
			out = append(out, fileGroup{paths: []string{f}})
			continue
		}
		if cf == nil {
			out = append(out, fileGroup{})
			cf = []string{}
		}
		cf = append(cf, these...)
	}
	for i := range out {
		if out[i].paths == nil && out[i].compose == nil {
			out[i].compose = cf
		}
	}
	return out
}

// composed is a compose project as the compose program reads it: its
// name, and flyd's documents.
type composed struct {
	Name      string        `json:"name"`
	Documents api.Documents `json:"documents"`
}

// loadCompose reads compose files as a compose project, in -p's project
// when there is one; what it reads without effect is warned of on
// stderr. The compose program, flyd-compose, reads them (its compose-documents):
// compose's loader, and what it links, would cost every call of this
// client its start-up.
func loadCompose(c *cli.Env, files, envFiles []string) (*composed, error) {
	return readCompose(c.Stderr, c.Project, files, envFiles)
}

func readCompose(warnings io.Writer, name string, files, envFiles []string) (*composed, error) {
	out, err := composeDocuments(warnings, name, files, envFiles, nil)
	if err != nil {
		return nil, err
	}
	var p composed
	if err := json.Unmarshal(out, &p); err != nil {
		return nil, fmt.Errorf("reading %s: %w", strings.Join(files, ", "), err)
	}
	return &p, nil
}

// readComposeModel is the compose project of the files as compose
// resolved it, YAML, with the services of profiles (nil: those without
// profiles).
func readComposeModel(warnings io.Writer, name string, files, envFiles, profiles []string) ([]byte, error) {
	if profiles == nil {
		profiles = []string{}
	}
	return composeDocuments(warnings, name, files, envFiles, profiles)
}

// composeDocuments runs flyd-compose's compose-documents on the
// files: flyd's documents, JSON, or with profiles not nil the compose
// model, YAML. Its warnings are written to warnings.
func composeDocuments(warnings io.Writer, name string, files, envFiles, profiles []string) ([]byte, error) {
	path, err := findProgram(composeProgram, "compose")
	if err != nil {
		return nil, err
	}
	args := []string{"compose-documents"}
	if name != "" {
		args = append(args, "--name", name)
	}
	for _, f := range envFiles {
		args = append(args, "--env-file", f)
	}
	if profiles != nil {
		args = append(args, "--model")
		for _, p := range profiles {
			args = append(args, "--profile", p)
		}
	}
	cmd := exec.Command(path, append(append(args, "--"), files...)...)
	cmd.Env = termHidden(os.Environ())
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(strings.TrimPrefix(errOut.String(), "flyd compose-documents: "))
		if msg == "" {
			msg = err.Error()
		}
		return nil, errors.New(msg)
	}
	_, _ = warnings.Write(errOut.Bytes())
	return out.Bytes(), nil
}

// composeProject is the name of the compose project the -f paths name,
// when the first of them is compose's: its `name:`,
// COMPOSE_PROJECT_NAME, or its directory's, as compose names it.
func composeProject(files []string) (string, bool, error) {
	gs := composeGroups(files)
	if len(gs) == 0 || gs[0].compose == nil {
		return "", false, nil
	}
	p, err := readCompose(io.Discard, "", gs[0].compose, nil)
	if err != nil {
		return "", true, err
	}
	return p.Name, true, nil
}
