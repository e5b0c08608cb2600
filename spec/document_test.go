package spec

import (
	"errors"
	"strings"
	"testing"
)

// TestDocKinds: the table holds workspaces, networks and policies in that
// order among its kinds, every kind in rank order, each kind's New is a
// document of it, and names and plurals are one kind's each.
func TestDocKinds(t *testing.T) {
	var names []string
	seen := map[string]bool{}
	for i, k := range DocKinds() {
		if i > 0 && DocKinds()[i-1].Rank > k.Rank {
			t.Errorf("%s is out of rank order", k.Name)
		}
		if k.Name == KindWorkspace || k.Name == KindNetwork || k.Name == KindPolicy {
			names = append(names, k.Name)
		}
		if d := k.New(); d.DocKind() != k.Name {
			t.Errorf("%s: New is a %s", k.Name, d.DocKind())
		}
		for _, n := range []string{k.Name, k.Plural} {
			if seen[n] {
				t.Errorf("%q names two kinds", n)
			}
			seen[n] = true
		}
		if got, ok := DocKindOf(k.Name); !ok || got.Plural != k.Plural {
			t.Errorf("DocKindOf(%q) = %+v, %v", k.Name, got, ok)
		}
	}
	if got := strings.Join(names, " "); got != "workspace network policy" {
		t.Errorf("kinds in rank order: %q", got)
	}
	if _, ok := DocKindOf("native"); ok {
		t.Error("a workload's runtime is a document kind")
	}
}

// TestParseAllByTheTable: every kind of the table is read by its `kind:`,
// a name defined twice is refused within its kind alone, and a `kind:`
// that is neither a workload's runtime nor a document's is refused,
// naming both lists and the line.
func TestParseAllByTheTable(t *testing.T) {
	var in []string
	var kinds []string
	for _, k := range DocKinds() {
		doc := "kind: " + k.Name + "\nname: same\n" + extraOf(k.Name)
		if _, err := ParseAll([]byte(doc)); err != nil {
			continue // the kind needs more than a name
		}
		in = append(in, doc)
		kinds = append(kinds, k.Name)
	}
	in = append(in, "name: same\ncommand: [/bin/true]\n")
	d, err := ParseAll([]byte(strings.Join(in, "---\n")))
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Docs) != len(kinds) || len(kinds) < 3 || len(d.Workloads) != 1 {
		t.Fatalf("read %d documents of %v and %d workloads", len(d.Docs), kinds, len(d.Workloads))
	}
	for i, k := range kinds {
		if d.Docs[i].DocKind() != k || d.Docs[i].DocName() != "same" {
			t.Errorf("document %d: %s %s; want %s same", i, d.Docs[i].DocKind(), d.Docs[i].DocName(), k)
		}
	}
	if _, err := ParseAll([]byte("kind: workspace\nname: a\n---\nkind: workspace\nname: a\n")); err == nil || !strings.Contains(err.Error(), `workspace "a" is defined more than once`) {
		t.Errorf("a workspace twice: %v", err)
	}

	_, err = ParseAll([]byte("name: x\ncommand: [/bin/true]\n---\nkind: netwrok\nname: y\n"))
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "kind" || !strings.Contains(err.Error(), "line 4:") ||
		!strings.Contains(err.Error(), `"netwrok" is neither a workload's runtime (native, nix, containerd or external) nor a document's kind (`+docKindNames()+`)`) {
		t.Errorf("an unknown kind: %v", err)
	}
	if _, err := DecodeDocumentJSON("netwrok", strings.NewReader(`{}`)); err == nil || !strings.Contains(err.Error(), "no document kind") {
		t.Errorf("decoding a document of no kind: %v", err)
	}
	if _, err := Parse([]byte("kind: workspace\nname: ws\n")); err == nil || !strings.Contains(err.Error(), "workspace document \"ws\": only workloads are read here") {
		t.Errorf("Parse of a workspace: %v", err)
	}
}

// extraOf is what a document of kind needs beside its name to be valid.
func extraOf(kind string) string {
	if kind == KindPolicy {
		return "select: {workloads: [same]}\n"
	}
	return ""
}
