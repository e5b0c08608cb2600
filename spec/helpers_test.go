package spec

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// minimal is the smallest valid native workload; tests append to it.
const minimal = "name: app\ncommand: [/bin/app]\n"

func dur(s string) Duration {
	d, err := time.ParseDuration(s)
	if err != nil {
		panic(err)
	}
	return Duration{d}
}

// fieldsOf lists the Field of every *FieldError inside err, in order.
func fieldsOf(err error) []string {
	var out []string
	var walk func(error)
	walk = func(err error) {
		if joined, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range joined.Unwrap() {
				walk(e)
			}
			return
		}
		var fe *FieldError
		if errors.As(err, &fe) {
			out = append(out, fe.Field)
		}
	}
	if err != nil {
		walk(err)
	}
	return out
}

func parseOne(t *testing.T, src string) *Workload {
	t.Helper()
	ws, err := Parse([]byte(src))
	if err != nil {
		t.Fatalf("Parse(%q): %v", src, err)
	}
	if len(ws) != 1 {
		t.Fatalf("Parse(%q): got %d workloads, want 1", src, len(ws))
	}
	return ws[0]
}

// wantFieldError checks that err holds exactly the FieldErrors for fields
// and that its message contains every part of want.
func wantFieldError(t *testing.T, err error, fields []string, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want errors for %v", fields)
	}
	if got := fieldsOf(err); !slices.Equal(got, fields) {
		t.Errorf("error fields = %q, want %q (error: %v)", got, fields, err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not contain %q", err, w)
		}
	}
}
