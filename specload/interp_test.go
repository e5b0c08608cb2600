package specload

import (
	"strings"
	"testing"
)

func TestExpand(t *testing.T) {
	vars := Layered(map[string]string{"NAME": "web", "EMPTY": "", "PORT": "8080", "Q": `a"b'c`, "NL": "x\ny"})
	tests := []struct {
		in, want string
		unset    []string // variables reported unset, in order
	}{
		{"plain", "plain", nil},
		{"${NAME}", "web", nil},
		{"pre-${NAME}-post", "pre-web-post", nil},
		{"${NAME}${PORT}", "web8080", nil},
		{"${Q}|${NL}", "a\"b'c|x\ny", nil},
		{"${MISSING}", "", []string{"MISSING"}},
		{"a${MISSING}b${OTHER}", "ab", []string{"MISSING", "OTHER"}},
		{"${EMPTY}", "", nil},
		// :- takes the default when unset or empty, - only when unset.
		{"${NAME:-x}", "web", nil},
		{"${MISSING:-x}", "x", nil},
		{"${EMPTY:-x}", "x", nil},
		{"${MISSING-x}", "x", nil},
		{"${EMPTY-x}", "", nil},
		{"${MISSING:-}", "", nil},
		{"${MISSING:-a b:c/d}", "a b:c/d", nil},
		// :+ and + take the other value when set (and non-empty for :+).
		{"${NAME:+on}", "on", nil},
		{"${EMPTY:+on}", "", nil},
		{"${EMPTY+on}", "on", nil},
		{"${MISSING+on}", "", nil},
		// :? and ? pass a set value.
		{"${NAME:?needed}", "web", nil},
		{"${EMPTY?needed}", "", nil},
		// Nested defaults, evaluated only when taken.
		{"${MISSING:-${NAME}}", "web", nil},
		{"${MISSING:-${OTHER:-${PORT}}}", "8080", nil},
		{"${NAME:-${OTHER:?never evaluated}}", "web", nil},
		{"${MISSING:-${OTHER}}", "", []string{"OTHER"}},
		{"${MISSING:-{x}}", "{x}", nil},
		// $$ is a '$'; a '$' before anything else stays.
		{"$$", "$", nil},
		{"$${NAME}", "${NAME}", nil},
		{"$$$${NAME}", "$${NAME}", nil},
		{"$$${NAME}", "$web", nil},
		{"${MISSING:-$$x}", "$x", nil},
		{"$NAME $HOME $(pwd) $1 $", "$NAME $HOME $(pwd) $1 $", nil},
		{"price: 5$", "price: 5$", nil},
		// The daemon's forms are left as written.
		{"${endpoint:web/api/http}", "${endpoint:web/api/http}", nil},
		{"${endpoint:web/api/main::grpc|authority}", "${endpoint:web/api/main::grpc|authority}", nil},
		{"${endpoint:${NAME}/api/http}", "${endpoint:web/api/http}", nil},
		{"${PORT_HTTP}", "${PORT_HTTP}", nil},
		{"0.0.0.0:${PORT_HTTP_ADMIN}", "0.0.0.0:${PORT_HTTP_ADMIN}", nil},
		{"${ADDR_X1}", "${ADDR_X1}", nil},
		{"${PORT}", "8080", nil}, // not a placeholder: no endpoint after it
		{"${PORT_http}", "", []string{"PORT_http"}},
	}
	for _, tc := range tests {
		var unset []string
		got, err := Expand(tc.in, vars, func(n string) error { unset = append(unset, n); return nil })
		if err != nil {
			t.Errorf("Expand(%q): %v", tc.in, err)
			continue
		}
		if got != tc.want || strings.Join(unset, ",") != strings.Join(tc.unset, ",") {
			t.Errorf("Expand(%q) = %q, unset %q; want %q, unset %q", tc.in, got, unset, tc.want, tc.unset)
		}
	}
}

func TestExpandErrors(t *testing.T) {
	vars := Layered(map[string]string{"EMPTY": "", "SECRET": "hunter2"})
	tests := []struct{ in, want string }{
		{"${MISSING:?set it in .env}", "required variable MISSING is not set: set it in .env"},
		{"${EMPTY:?set it}", "required variable EMPTY is empty: set it"},
		{"${MISSING?}", "required variable MISSING is not set"},
		{"${MISSING:-${INNER:?inner needed}}", "required variable INNER is not set: inner needed"},
		{"${}", "a ${ must start with a variable name"},
		{"${1X}", "a ${ must start with a variable name"},
		{"${-x}", "a ${ must start with a variable name"},
		{"${SECRET", "a ${ has no closing }"},
		{"${SECRET:-${X}", "a ${ has no closing }"},
		{"${SECRET x}", "${SECRET…}: after a variable's name comes }"},
		{"${SECRET.x}", "${SECRET…}: after a variable's name comes }"},
		{"${PORT_HTTP:-80}", "${PORT_HTTP:-…}: ${PORT_…} and ${ADDR_…} are the daemon's endpoint placeholders"},
		{strings.Repeat("${A:-", 40) + strings.Repeat("}", 40), "nested too deeply"},
	}
	for _, tc := range tests {
		_, err := Expand(tc.in, vars, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Expand(%q): error %v, want %q", tc.in, err, tc.want)
			continue
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("Expand(%q): error %q shows a value", tc.in, err)
		}
	}
	// An error from unset stops the expansion.
	_, err := Expand("a${X}", NoVars, func(n string) error { return &testErr{n} })
	if _, ok := err.(*testErr); !ok {
		t.Errorf("unset's error: %v", err)
	}
}

type testErr struct{ name string }

func (e *testErr) Error() string { return e.name }
