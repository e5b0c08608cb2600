package spec

import (
	"errors"
	"strings"
	"testing"
)

func TestOrder(t *testing.T) {
	w := func(name string, after ...string) *Workload { return &Workload{Name: name, After: after} }
	levels, err := Order([]*Workload{w("api", "db", "cache"), w("db"), w("cache", "db"), w("web", "api", "elsewhere")})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, lv := range levels {
		var names []string
		for _, x := range lv {
			names = append(names, x.Name)
		}
		got = append(got, strings.Join(names, ","))
	}
	if strings.Join(got, " | ") != "db | cache | api | web" {
		t.Fatalf("levels %q", got)
	}
	_, err = Order([]*Workload{w("a", "b"), w("b", "c"), w("c", "a")})
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "after" || !strings.Contains(err.Error(), "cycle") {
		t.Fatalf("cycle: %v", err)
	}
}
