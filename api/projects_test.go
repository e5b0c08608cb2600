package api

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/flyd-dev/flyd/spec"
)

// TestProjectDocumentsByKind: a project's documents and its change travel
// under each kind's plural, whatever kinds the table holds, and come back
// as they went; a key of no kind, or a document its kind refuses, is
// refused, saying where.
func TestProjectDocumentsByKind(t *testing.T) {
	var docs Documents
	docs.Workloads = []*spec.Workload{{Name: "w", Command: []string{"/bin/true"}}}
	docs.Keep = []string{"old"}
	change := ProjectChange{Applied: []Result{}, Removed: []Result{}, Docs: map[string][]string{}, Volumes: []string{"p.v"}}
	var keys []string
	for _, k := range spec.DocKinds() {
		var d spec.Document
		var err error
		for _, body := range []string{`{"kind":"` + k.Name + `","name":"a"}`, `{"kind":"` + k.Name + `","name":"a","select":{"workloads":["w"]}}`} {
			if d, err = spec.DecodeDocumentJSON(k.Name, strings.NewReader(body)); err == nil {
				break
			}
		}
		if err != nil {
			continue // the kind needs more than a name
		}
		docs.Docs = append(docs.Docs, d)
		change.Docs[k.Name] = []string{"p.a"}
		keys = append(keys, k.Plural)
	}

	if len(keys) < 3 {
		t.Fatalf("documents of %v alone", keys)
	}
	b, err := json.Marshal(docs)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, key := range append(keys, "workloads", "keep") {
		if _, ok := m[key]; !ok {
			t.Errorf("documents on the wire have no %q: %s", key, b)
		}
	}
	var back Documents
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Workloads) != 1 || !slices.Equal(back.Keep, docs.Keep) || len(back.Docs) != len(docs.Docs) {
		t.Fatalf("documents came back as %+v", back)
	}
	for _, d := range docs.Docs {
		if !slices.ContainsFunc(back.Docs, func(o spec.Document) bool { return reflect.DeepEqual(o, d) }) {
			t.Errorf("%s %s did not come back as it went", d.DocKind(), d.DocName())
		}
	}

	b, err = json.Marshal(change)
	if err != nil {
		t.Fatal(err)
	}
	var backChange ProjectChange
	if err := json.Unmarshal(b, &backChange); err != nil || !reflect.DeepEqual(backChange, change) {
		t.Errorf("change %s came back as %+v, %v", b, backChange, err)
	}
	for _, key := range keys {
		if !strings.Contains(string(b), `"`+key+`":["p.a"]`) {
			t.Errorf("the change has no %q: %s", key, b)
		}
	}
	if !strings.HasPrefix(string(b), `{"applied":[],"removed":[],"`+keys[len(keys)-1]+`"`) || !strings.HasSuffix(string(b), `"volumes":["p.v"]}`) {
		t.Errorf("the change's keys are not in their order (the outcomes, the documents as they went, the volumes): %s", b)
	}

	if err := json.Unmarshal([]byte(`{"netwroks":[]}`), &back); err == nil || !strings.Contains(err.Error(), `unknown field "netwroks"`) {
		t.Errorf("a key of no kind: %v", err)
	}
	err = json.Unmarshal([]byte(`{"workspaces":[{"kind":"workspace","name":"Not A Name"}]}`), &back)
	var fe *spec.FieldError
	if !errors.As(err, &fe) || fe.Field != "workspaces[0].name" {
		t.Errorf("an invalid workspace: %v", err)
	}
}
