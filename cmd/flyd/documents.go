package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"text/tabwriter"

	"github.com/flyd-dev/flyd/cmd/internal/cli"
	"github.com/flyd-dev/flyd/spec"
)

// Every kind of document beside workloads (spec.DocKinds) has its command,
// `flyd PLURAL [rm NAME]`, and is applied by `flyd apply`. A kind shows its
// documents by name alone unless it registers a view of its own.

func init() {
	for _, k := range spec.DocKinds() {
		summary := "list the " + k.Name + " documents, or remove one"
		if v, ok := docViews[k.Name]; ok && v.summary != "" {
			summary = v.summary
		}
		cli.Register(k.Plural, summary, "[rm NAME]", func(ctx context.Context, c *cli.Env, args []string) error {
			return documentsCmd(ctx, c, args, k)
		})
	}
}

// docView is how the CLI shows a kind's documents, from what the daemon
// answers (each a JSON object).
type docView struct {
	summary string
	header  string
	// typed is the documents as the view's type, for --json: what the
	// daemon answered, in the view's own fields.
	typed   func(raw json.RawMessage) (any, error)
	rows    func(raw json.RawMessage) ([]string, error)
	applied func(c *cli.Env, raw json.RawMessage) error
}

// docViews are the kinds' own views: kind → view.
var docViews = map[string]docView{}

// registerView gives kind a view of its own: the command's summary, the
// table's header and a row of each document as the daemon shows it (a V),
// and what `flyd apply` says of one it put (nil: "KIND NAME applied"). It
// is called to initialize a package variable, so that the views are there
// before the commands are registered.
func registerView[V any](kind, summary, header string, row func(V) string, applied func(c *cli.Env, v V)) bool {
	v := docView{summary: summary, header: header,
		typed: func(raw json.RawMessage) (any, error) {
			vs := []V{}
			err := json.Unmarshal(raw, &vs)
			return vs, err
		},
		rows: func(raw json.RawMessage) ([]string, error) {
			var vs []V
			if err := json.Unmarshal(raw, &vs); err != nil {
				return nil, err
			}
			out := make([]string, len(vs))
			for i, v := range vs {
				out[i] = row(v)
			}
			return out, nil
		}}
	if applied != nil {
		v.applied = func(c *cli.Env, raw json.RawMessage) error {
			var a V
			if err := json.Unmarshal(raw, &a); err != nil {
				return err
			}
			applied(c, a)
			return nil
		}
	}
	docViews[kind] = v
	return true
}

// named is what every document shows: its name.
type named struct {
	Name string `json:"name"`
}

// documentsCmd is `flyd PLURAL [rm NAME]`: the documents of a kind, of
// -p's project with -p, as a table or JSON, or the removal of one by its
// name in the project.
func documentsCmd(ctx context.Context, c *cli.Env, args []string, k spec.DocKind) error {
	pos, err := c.Parse(c.Flags(), args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) == 2 && pos[0] == "rm":
		full := c.FullName(pos[1])
		if err := c.Client.DeleteDocument(ctx, k.Name, full); err != nil {
			return err
		}
		return removed(c, k.Name, full)
	case len(pos) > 0:
		return cli.Usagef("unexpected argument %q", pos[0])
	}
	v, err := c.Client.Documents(ctx, k.Name)
	if err != nil {
		return err
	}
	var items []json.RawMessage
	if err := json.Unmarshal(v.(json.RawMessage), &items); err != nil {
		return err
	}
	if c.Project != "" {
		items = slices.DeleteFunc(items, func(raw json.RawMessage) bool {
			var n named
			return json.Unmarshal(raw, &n) != nil || !c.InProject(n.Name)
		})
	}
	all, err := json.Marshal(items)
	if err != nil {
		return err
	}
	view, ok := docViews[k.Name]
	if c.JSON {
		if !ok {
			if items == nil {
				items = []json.RawMessage{}
			}
			return printJSON(c.Stdout, items)
		}
		vs, err := view.typed(all)
		if err != nil {
			return err
		}
		return printJSON(c.Stdout, vs)
	}
	if !ok {
		view = docView{header: "NAME", rows: func(raw json.RawMessage) ([]string, error) {
			var ns []named
			err := json.Unmarshal(raw, &ns)
			out := make([]string, len(ns))
			for i, n := range ns {
				out[i] = n.Name
			}
			return out, err
		}}
	}
	rows, err := view.rows(all)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(c.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, view.header)
	for _, r := range rows {
		fmt.Fprintln(tw, r)
	}
	return tw.Flush()
}

// putDocuments puts docs in force, kind by kind in rank order, before the
// workloads they hold for: a workspace's configurations, a network's
// settings and a policy's rules from the workloads' first run.
func putDocuments(ctx context.Context, c *cli.Env, docs []spec.Document) error {
	rank := map[string]int{}
	for i, k := range spec.DocKinds() {
		rank[k.Name] = i
	}
	docs = slices.Clone(docs)
	slices.SortStableFunc(docs, func(a, b spec.Document) int { return cmp.Compare(rank[a.DocKind()], rank[b.DocKind()]) })
	for _, d := range docs {
		v, err := c.Client.PutDocument(ctx, d)
		if err != nil {
			return fmt.Errorf("%s %s: %w", d.DocKind(), d.DocName(), err)
		}
		if c.JSON {
			continue
		}
		raw, _ := v.(json.RawMessage)
		if view := docViews[d.DocKind()]; view.applied != nil && view.applied(c, raw) == nil {
			continue
		}
		var n named
		_ = json.Unmarshal(raw, &n)
		fmt.Fprintf(c.Stdout, "%s %s applied\n", d.DocKind(), cmp.Or(n.Name, d.DocName()))
	}
	return nil
}
