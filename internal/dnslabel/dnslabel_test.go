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
