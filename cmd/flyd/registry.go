package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/flyd-dev/flyd/internal/cli"
	"github.com/flyd-dev/flyd/registryclient"
)

const (
	registryServeUsage = "serve [flags] (flyd registry serve -h lists them)"
	registryLsUsage    = "ls [--registry URL] [--registry-key-file F] [--healthy-only] [--json] [--socket S]"
)

func init() {
	cli.Register("registry", "run or query a service registry", registryServeUsage+"\n       flyd registry "+registryLsUsage, cmdRegistry)
}

func cmdRegistry(ctx context.Context, c *cli.Env, args []string) error {
	if len(args) == 0 {
		return cli.Usagef("name a subcommand: serve or ls")
	}
	switch args[0] {
	case "serve":
		return execDaemon("registry", args...)
	case "ls":
		c.Usage = registryLsUsage
		return registryLs(ctx, c, args[1:])
	case "-h", "--help", "help":
		fmt.Fprintf(c.Stderr, "usage: flyd registry %s\n       flyd registry %s\n", registryServeUsage, registryLsUsage)
		return flag.ErrHelp
	}
	return cli.Usagef("unknown subcommand %q: serve or ls", args[0])
}

func registryLs(ctx context.Context, c *cli.Env, args []string) error {
	fs := c.Flags()
	url := fs.String("registry", "", "registry URL (default: the one the daemon uses)")
	keyFile := fs.String("registry-key-file", "", "file holding the registry's API key (default: the daemon's)")
	healthy := fs.Bool("healthy-only", false, "only the healthy instances")
	pos, err := c.Parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return cli.Usagef("unexpected argument %q", pos[0])
	}
	if *url == "" || *keyFile == "" {
		if err := daemonRegistry(c, ctx, url, keyFile); err != nil {
			return err
		}
	}
	rc, err := registryclient.New(*url, *keyFile)
	if err != nil {
		return err
	}
	defer rc.Close()
	ins, err := rc.Instances(ctx, *healthy)
	if err != nil {
		if errors.Is(err, registryclient.ErrUnauthorized) {
			return fmt.Errorf("%w (is --registry-key-file the registry's key?)", err)
		}
		return err
	}
	if c.JSON {
		if ins == nil {
			ins = []registryclient.Instance{}
		}
		return printJSON(c.Stdout, ins)
	}
	printInstances(c.Stdout, ins, time.Now())
	return nil
}

func printInstances(w io.Writer, ins []registryclient.Instance, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tADDRESS\tPORT\tHEALTHY\tTTL\tAGE\tID")
	for _, in := range ins {
		ttl := "never"
		if in.TTL > 0 {
			ttl = time.Duration(in.TTL).String()
		}
		age := "-"
		if !in.RegisteredAt.IsZero() {
			age = now.Sub(in.RegisteredAt).Round(time.Second).String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%t\t%s\t%s\t%s\n", in.Name, in.Address, strconv.Itoa(in.Port),
			in.Healthy, ttl, age, in.ID)
	}
	tw.Flush()
}

// daemonRegistry fills in the registry URL and key file the daemon uses
// where the flags leave them out. Without a daemon answering, the defaults
// of `flyd registry serve` stand.
func daemonRegistry(c *cli.Env, ctx context.Context, url, keyFile *string) error {
	st, err := c.Client.Status(ctx)
	if err != nil {
		*url = cmp.Or(*url, registryclient.DefaultURL)
		*keyFile = cmp.Or(*keyFile, registryclient.DefaultKeyFile)
		return nil
	}
	if st.Registry.URL == "" && *url == "" {
		return fmt.Errorf("the daemon on %s registers into no registry (--registry off); name one with --registry", c.Socket)
	}
	*url = cmp.Or(*url, st.Registry.URL)
	*keyFile = cmp.Or(*keyFile, st.Registry.KeyFile, registryclient.DefaultKeyFile)
	return nil
}
