package specload

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// Lookup is where variables come from: a variable's value and whether it
// is set.
type Lookup func(name string) (value string, ok bool)

// NoVars is a Lookup where no variable is set.
func NoVars(string) (string, bool) { return "", false }

// Expand interpolates s (see the package doc). unset is called with the
// name of each variable used without a default that is not set, which
// becomes an empty string, as compose does; an error from unset stops the
// expansion. Errors name the variable, never a value.
func Expand(s string, vars Lookup, unset func(name string) error) (string, error) {
	if !strings.Contains(s, "$") {
		return s, nil
	}
	e := expander{vars: vars, unset: unset}
	return e.expand(s)
}

// daemonPlaceholder is a name the daemon replaces in a command:
// ${PORT_HTTP}, ${ADDR_HTTP}.
var daemonPlaceholder = regexp.MustCompile(`^(PORT|ADDR)_[A-Z0-9_]+$`)

// maxDepth bounds nested defaults, as spec bounds nested documents.
const maxDepth = 32

type expander struct {
	vars  Lookup
	unset func(string) error
	depth int
}

func (e *expander) expand(s string) (string, error) {
	if e.depth++; e.depth > maxDepth {
		return "", errors.New("${…} nested too deeply")
	}
	defer func() { e.depth-- }()
	var b strings.Builder
	for i := 0; i < len(s); {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			i++
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i += 2
		case '{':
			end := closing(s, i+2)
			if end < 0 {
				return "", errors.New("a ${ has no closing }")
			}
			out, err := e.braced(s[i+2 : end])
			if err != nil {
				return "", err
			}
			b.WriteString(out)
			i = end + 1
		default:
			b.WriteByte('$')
			i++
		}
	}
	return b.String(), nil
}

// closing is the index of the '}' that closes a ${ whose body starts at
// i, past nested ${…} and $$; -1 when there is none.
func closing(s string, i int) int {
	depth := 0
	for ; i < len(s); i++ {
		switch {
		case s[i] == '$' && i+1 < len(s) && (s[i+1] == '$' || s[i+1] == '{'):
			if s[i+1] == '{' {
				depth++
			}
			i++
		case s[i] == '}':
			if depth == 0 {
				return i
			}
			depth--
		}
	}
	return -1
}

// braced resolves the body of one ${…}.
func (e *expander) braced(body string) (string, error) {
	n := nameLen(body)
	if n == 0 {
		return "", errors.New("a ${ must start with a variable name (letters, digits and '_', not a digit first)")
	}
	name, rest := body[:n], body[n:]
	if rest == "" {
		if daemonPlaceholder.MatchString(name) {
			return "${" + name + "}", nil
		}
		v, ok := e.vars(name)
		if !ok && e.unset != nil {
			if err := e.unset(name); err != nil {
				return "", err
			}
		}
		return v, nil
	}
	op, word := operator(rest)
	if op == "" {
		if rest[0] == ':' {
			// The daemon's form, ${endpoint:…}: kept for it, with the
			// variables inside it given their values.
			inner, err := e.expand(rest[1:])
			return "${" + name + ":" + inner + "}", err
		}
		return "", fmt.Errorf("${%s…}: after a variable's name comes }, :-, -, :?, ?, :+ or +", name)
	}
	if daemonPlaceholder.MatchString(name) {
		return "", fmt.Errorf("${%s%s…}: ${PORT_…} and ${ADDR_…} are the daemon's endpoint placeholders, written ${%s} alone", name, op, name)
	}
	v, set := e.vars(name)
	nonEmpty := set && v != ""
	switch op {
	case ":-", "-":
		if nonEmpty || set && op == "-" {
			return v, nil
		}
		return e.expand(word)
	case ":+", "+":
		if nonEmpty || set && op == "+" {
			return e.expand(word)
		}
		return "", nil
	}
	// ":?" and "?"
	if nonEmpty || set && op == "?" {
		return v, nil
	}
	what := "is not set"
	if set {
		what = "is empty"
	}
	if word = strings.TrimSpace(word); word != "" {
		return "", fmt.Errorf("required variable %s %s: %s", name, what, word)
	}
	return "", fmt.Errorf("required variable %s %s", name, what)
}

// nameLen is the length of the variable name at the start of s.
func nameLen(s string) int {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9' {
			continue
		}
		return i
	}
	return len(s)
}

// operator splits what follows a name into its operator and word.
func operator(rest string) (op, word string) {
	for _, op := range []string{":-", ":?", ":+", "-", "?", "+"} {
		if w, ok := strings.CutPrefix(rest, op); ok {
			return op, w
		}
	}
	return "", ""
}
