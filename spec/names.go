package spec

import (
	"strings"

	"github.com/flyd-dev/flyd/internal/dnslabel"
)

// Names end up in DNS labels, cgroup and unit names and environment
// variables, so they follow the DNS label rule.
const nameRule = dnslabel.Rule

func validName(s string) bool { return dnslabel.Valid(s) }

// validEnvKey reports whether s is letters, digits and '_', not starting
// with a digit.
func validEnvKey(s string) bool {
	if s == "" || (s[0] >= '0' && s[0] <= '9') {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') && c != '_' {
			return false
		}
	}
	return true
}

const envKeyRule = "must be letters, digits and '_', not starting with a digit"

// EnvName turns an endpoint name into the suffix of its environment variable:
// "http-admin" becomes "HTTP_ADMIN", read by the process as PORT_HTTP_ADMIN.
// The name rule makes this one-to-one.
func EnvName(endpoint string) string {
	return strings.ReplaceAll(strings.ToUpper(endpoint), "-", "_")
}
