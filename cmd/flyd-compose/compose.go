package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/flyd-dev/flyd/api"
	"github.com/flyd-dev/flyd/cmd/internal/cli"
	"github.com/flyd-dev/flyd/compose"
)

func init() { cli.RegisterHidden("compose-documents", cmdComposeDocuments) }

// cmdComposeDocuments reads compose files as one project (package
// compose) and prints it as flyd's documents, JSON, on stdout:
// {"name": PROJECT, "documents": {"workloads": […], "networks": […]}}; what
// is read without effect is warned of on stderr. With --model it prints
// the project as compose resolved it instead, YAML, the services of the
// --profile profiles in (flyd config --format compose). flyd's client
// runs it for every compose file it meets: compose's loader is linked
// here, so that the client's start-up does not pay for it.
func cmdComposeDocuments(ctx context.Context, c *cli.Env, args []string) error {
	fs := flag.NewFlagSet(c.Name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	name := fs.String("name", "", "the project's name (-p)")
	var envFiles []string
	fs.Func("env-file", "variables in place of the project directory's .env (repeatable)", func(v string) error {
		envFiles = append(envFiles, v)
		return nil
	})
	model := fs.Bool("model", false, "print the compose model, YAML")
	var profiles []string
	fs.Func("profile", "with --model, a profile whose services are printed (repeatable; * for all)", func(v string) error {
		profiles = append(profiles, v)
		return nil
	})
	if err := fs.Parse(args); err != nil {
		return cli.Usage(err)
	}
	if fs.NArg() == 0 {
		return cli.Usagef("no compose file")
	}
	p, err := compose.Load(ctx, compose.Options{
		Files:    fs.Args(),
		Name:     *name,
		Environ:  os.Environ(),
		EnvFiles: envFiles,
		Warn:     func(msg string) { fmt.Fprintf(c.Stderr, "warning: %s\n", strings.TrimSpace(msg)) },
	})
	if err != nil {
		return err
	}
	if *model {
		out, err := p.ModelYAML(profiles)
		if err != nil {
			return err
		}
		_, err = c.Stdout.Write(out)
		return err
	}
	return json.NewEncoder(c.Stdout).Encode(struct {
		Name      string        `json:"name"`
		Documents api.Documents `json:"documents"`
	}{p.Name, api.Documents{Workloads: p.Docs.Workloads, Docs: p.Docs.Docs}})
}
