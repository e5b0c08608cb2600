package main

import (
	"bytes"
	"context"
	"fmt"
	"os"

	"go.yaml.in/yaml/v3"

	"github.com/flyd-dev/flyd/cmd/internal/cli"
	"github.com/flyd-dev/flyd/specload"
)

func init() {
	cli.Register("config", "print the project the files make, as flyd's documents: what up would apply",
		"[-p PROJECT] -f FILE|DIR [-f ...] [--profile P] [--env-file F] [--format yaml|json|compose]", cmdConfig)
}

// cmdConfig reads the files as up reads them (compose files through the
// compose package, flyd's own as apply reads them; profiles selected)
// and prints the documents, resolved: networks and the other kinds
// first, then the workloads, each with its defaults and in its project,
// secret values redacted. It asks nothing of the daemon. YAML is one
// document per `---`; JSON, one array, which apply reads back. --format
// compose prints compose files' project as compose resolved it, as
// `docker compose config` does, before flyd maps it.
func cmdConfig(ctx context.Context, c *cli.Env, args []string) error {
	fs := c.Flags()
	pf := addProjectFlags(fs)
	format := fs.String("format", "yaml", "yaml, json, or compose (the compose model of compose files)")
	pos, err := c.Parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return cli.Usagef("unexpected argument %q", pos[0])
	}
	if *format != "yaml" && *format != "json" && *format != "compose" {
		return cli.Usagef("--format: yaml, json or compose, not %q", *format)
	}
	if len(pf.files) == 0 {
		return cli.Usagef("-f is required")
	}
	if _, err := projectName(c, pf.files); err != nil {
		return err
	}
	if *format == "compose" {
		return printComposeModel(c, pf)
	}
	// What reading says of its own goes to stderr: stdout is the documents'.
	quiet := *c
	quiet.Stdout = c.Stderr
	d, _, err := loadSelected(&quiet, pf.files, pf.envFiles, pf.profiles)
	if err != nil {
		return err
	}
	var docs []any
	for _, doc := range d.Docs {
		docs = append(docs, doc)
	}
	for _, w := range d.Workloads {
		docs = append(docs, w.Redacted())
	}
	if *format == "json" {
		return printJSON(c.Stdout, docs)
	}
	for i, doc := range docs {
		out, err := yamlOf(doc)
		if err != nil {
			return err
		}
		if i > 0 {
			fmt.Fprintln(c.Stdout, "---")
		}
		if _, err := c.Stdout.Write(out); err != nil {
			return err
		}
	}
	return nil
}

// printComposeModel prints the compose project of the -f files, which
// must all be compose's, as compose resolved it, with the services of the
// profiles asked for.
func printComposeModel(c *cli.Env, pf *projectFlags) error {
	groups := composeGroups(pf.files)
	for _, g := range groups {
		if g.compose == nil {
			return cli.Usagef("--format compose: %s is not a compose file", g.name())
		}
	}
	profiles, err := specload.Profiles(pf.profiles, os.Getenv("FLYD_PROFILES"))
	if err != nil {
		return cli.Usagef("%v", err)
	}
	out, err := readComposeModel(c.Stderr, c.Project, groups[0].compose, pf.envFiles, profiles)
	if err != nil {
		return err
	}
	_, err = c.Stdout.Write(out)
	return err
}

// yamlOf is v's JSON written as block YAML, its keys in the JSON's order
// (specload.BlockNode).
func yamlOf(v any) ([]byte, error) {
	n, err := specload.BlockNode(v)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(n); err != nil {
		return nil, err
	}
	return b.Bytes(), enc.Close()
}
