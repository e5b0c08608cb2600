package dnslabel

import (
	"regexp"
	"strings"
	"testing"
)

// The rule as the regular expression it replaces: both must agree.
var reference = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

func TestValid(t *testing.T) {
	cases := []string{"", "a", "0", "-", "a-", "-a", "a-b", "web", "web-1", "Web", "w_b", "w.b", "w/b", "é",
		strings.Repeat("a", 63), strings.Repeat("a", 64), "a" + strings.Repeat("-", 61) + "b", "a\n", "\x00"}
	for _, s := range cases {
		if got, want := Valid(s), reference.MatchString(s); got != want {
			t.Errorf("Valid(%q) = %v, want %v", s, got, want)
		}
	}
}

func FuzzValid(f *testing.F) {
	f.Add("web-1")
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := Valid(s), reference.MatchString(s); got != want {
			t.Fatalf("Valid(%q) = %v, want %v", s, got, want)
		}
	})
}

func TestValidFull(t *testing.T) {
	for s, want := range map[string]bool{"web": true, "ci-7.web": true, "ci-7.": false, ".web": false, "a.b.c": false,
		"a..b": false, "Ci.web": false, "a/b.c": false, "..": false, strings.Repeat("a", 63) + "." + strings.Repeat("b", 63): true} {
		if got := ValidFull(s); got != want {
			t.Errorf("ValidFull(%q) = %v, want %v", s, got, want)
		}
	}
}
