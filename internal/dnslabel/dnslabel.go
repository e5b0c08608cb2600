// Package dnslabel is the one rule for every name flyd accepts (workloads,
// endpoints, networks, cgroups): a DNS label. Names become file names,
// cgroup directories, host names and environment variable suffixes, so
// they admit neither dots nor slashes nor capitals.
package dnslabel

import "strings"

// Rule says the rule in words, for error messages.
const Rule = "1 to 63 lowercase letters, digits or '-', starting and ending with a letter or digit"

// Valid reports whether s follows Rule.
func Valid(s string) bool {
	if len(s) == 0 || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return false
		}
	}
	return true
}

// FullRule is what ValidFull accepts.
const FullRule = "a name of " + Rule + ", or PROJECT.NAME, each so"

// ValidFull reports whether s is a label or two joined by a dot: a name
// or a project's name and a name (spec.FullName). No path, file or
// identifier made of it can hold a '/', a '..' or a leading '.'.
func ValidFull(s string) bool {
	project, name, ok := strings.Cut(s, ".")
	if !ok {
		return Valid(s)
	}
	return Valid(project) && Valid(name)
}
