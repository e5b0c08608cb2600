package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/flyd-dev/flyd/cmd/internal/cli"
	"github.com/flyd-dev/flyd/registryclient"
)

const (
	registryLsUsage    = "ls [-w] [--registry URL] [--registry-key-file F] [--registry-ca F] [--healthy-only] [--json] [--socket S]"
	registryDriftUsage = "drift --reference FILE [--registry URL] [--registry-key-file F] [--registry-ca F] [--json] [--socket S]"
)

// registryCAEnv names a file of CA certificates the registry commands
// trust, when --registry-ca does not.
const registryCAEnv = "FLYD_REGISTRY_CA"

// errDrift makes `flyd registry drift` exit 1 once it has said the drift.
var errDrift = errors.New("the registry drifts from the reference")

// registryDrift compares the live registry with a static reference in the
// export's format (R8), port by port, and exits 1 on drift.
func registryDrift(ctx context.Context, c *cli.Env, args []string) error {
	fs := c.Flags()
	url := fs.String("registry", "", "registry URL (default: the one the daemon uses)")
	keyFile := fs.String("registry-key-file", "", "file holding the registry's API key (default: the daemon's)")
	ca := fs.String("registry-ca", os.Getenv(registryCAEnv), "CA certificates (PEM) to trust for an https:// registry (default: $"+registryCAEnv+", else the system's)")
	refFile := fs.String("reference", "", "the reference, in the export's format (koder-service-ports.toml)")
	pos, err := c.Parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return cli.Usagef("unexpected argument %q", pos[0])
	}
	if *refFile == "" {
		return cli.Usagef("--reference FILE is needed")
	}
	f, err := os.Open(*refFile)
	if err != nil {
		return err
	}
	reference, err := registryclient.ParseReference(f)
	f.Close()
	if err != nil {
		return fmt.Errorf("%s: %w", *refFile, err)
	}
	ins, err := registryInstances(c, ctx, *url, *keyFile, *ca, false)
	if err != nil {
		return err
	}
	live := make([]registryclient.Owner, len(ins))
	for i, in := range ins {
		live[i] = registryclient.OwnerOf(in)
	}
	drift := registryclient.CheckDrift(reference, live)
	if c.JSON {
		if drift == nil {
			drift = []registryclient.Drift{}
		}
		if err := printJSON(c.Stdout, drift); err != nil {
			return err
		}
	} else {
		for _, d := range drift {
			fmt.Fprintln(c.Stdout, d)
		}
	}
	if len(drift) > 0 {
		return fmt.Errorf("%w: %d ports", errDrift, len(drift))
	}
	return nil
}

func registryLs(ctx context.Context, c *cli.Env, args []string) error {
	fs := c.Flags()
	url := fs.String("registry", "", "registry URL (default: the one the daemon uses)")
	keyFile := fs.String("registry-key-file", "", "file holding the registry's API key (default: the daemon's)")
	ca := fs.String("registry-ca", os.Getenv(registryCAEnv), "CA certificates (PEM) to trust for an https:// registry (default: $"+registryCAEnv+", else the system's)")
	healthy := fs.Bool("healthy-only", false, "only the healthy instances")
	var watch bool
	fs.BoolVar(&watch, "w", false, "then print each change as it happens, until interrupted")
	fs.BoolVar(&watch, "watch", false, "the same as -w")
	pos, err := c.Parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return cli.Usagef("unexpected argument %q", pos[0])
	}
	if watch {
		if *healthy {
			return cli.Usagef("-w tells every instance: --healthy-only is for a listing")
		}
		return registryWatch(ctx, c, *url, *keyFile, *ca)
	}
	ins, err := registryInstances(c, ctx, *url, *keyFile, *ca, *healthy)
	if err != nil {
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

// registryClient is a client of the registry at url with the key in
// keyFile, or, for what is not given, the daemon's.
func registryClient(c *cli.Env, ctx context.Context, url, keyFile, ca string) (*registryclient.Client, error) {
	if url == "" || keyFile == "" {
		if err := daemonRegistry(c, ctx, &url, &keyFile); err != nil {
			return nil, err
		}
	}
	var opts []registryclient.Option
	if ca != "" {
		tc, err := registryclient.CAFile(ca)
		if err != nil {
			return nil, err
		}
		opts = append(opts, registryclient.WithTLS(tc))
	}
	return registryclient.New(url, keyFile, opts...)
}

// registryInstances lists a registry's instances.
func registryInstances(c *cli.Env, ctx context.Context, url, keyFile, ca string, healthy bool) ([]registryclient.Instance, error) {
	rc, err := registryClient(c, ctx, url, keyFile, ca)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	ins, err := rc.Instances(ctx, healthy)
	if errors.Is(err, registryclient.ErrUnauthorized) {
		return nil, fmt.Errorf("%w (is --registry-key-file the registry's key?)", err)
	}
	return ins, err
}

// registryWatch prints the registry's instances, then each change as it
// happens until ctx is done (an interrupt); with --json, every change
// (the snapshot's puts, then synced, then the changes) as a JSON line.
func registryWatch(ctx context.Context, c *cli.Env, url, keyFile, ca string) error {
	rc, err := registryClient(c, ctx, url, keyFile, ca)
	if err != nil {
		return err
	}
	defer rc.Close()
	ch, err := rc.Watch(ctx, 0)
	if errors.Is(err, registryclient.ErrUnauthorized) {
		return fmt.Errorf("%w (is --registry-key-file the registry's key?)", err)
	}
	if err != nil {
		return err
	}
	var snapshot []registryclient.Instance
	listing := true
	for ch := range ch {
		if ch.Type == registryclient.ChangeError {
			return ch.Err
		}
		if c.JSON {
			if err := printJSONLine(c.Stdout, ch); err != nil {
				return err
			}
			continue
		}
		switch {
		case listing && ch.Type == registryclient.ChangePut:
			snapshot = append(snapshot, ch.Instance)
		case listing && ch.Type == registryclient.ChangeSynced:
			slices.SortFunc(snapshot, func(a, b registryclient.Instance) int {
				return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.ID, b.ID))
			})
			printInstances(c.Stdout, snapshot, time.Now())
			listing, snapshot = false, nil
		case ch.Type == registryclient.ChangeSynced:
			fmt.Fprintf(c.Stdout, "%s  listed again at revision %d\n", time.Now().Format(time.TimeOnly), ch.Rev)
		default:
			printChange(c.Stdout, ch, time.Now())
		}
	}
	return nil // interrupted
}

func printChange(w io.Writer, ch registryclient.Change, now time.Time) {
	in := ch.Instance
	if ch.Type == registryclient.ChangeDelete && in.Name == "" {
		fmt.Fprintf(w, "%s  %-6s %s\n", now.Format(time.TimeOnly), ch.Type, in.ID)
		return
	}
	health := "healthy"
	if !in.Healthy {
		health = "unhealthy"
	}
	fmt.Fprintf(w, "%s  %-6s %s %s:%d %s %s\n", now.Format(time.TimeOnly), ch.Type, in.Name, in.Address, in.Port, health, in.ID)
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func printJSONLine(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}
