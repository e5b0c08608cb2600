package spec

import (
	"regexp"
	"strings"
)

// Names end up in DNS labels, cgroup and unit names and environment
// variables, so they follow the DNS label rule.
var nameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

const nameRule = "1 to 63 lowercase letters, digits or '-', starting and ending with a letter or digit"

func validName(s string) bool { return nameRE.MatchString(s) }

var envKeyRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

const envKeyRule = "must be letters, digits and '_', not starting with a digit"

// EnvName turns an endpoint name into the suffix of its environment variable:
// "http-admin" becomes "HTTP_ADMIN", read by the process as PORT_HTTP_ADMIN.
// The name rule makes this one-to-one.
func EnvName(endpoint string) string {
	return strings.ReplaceAll(strings.ToUpper(endpoint), "-", "_")
}
