// Package carriers builds and checks what reaches exec: a workload's
// environment, in a fixed order of precedence and in a normal form, so that
// what is measured before exec is exactly what the kernel will be given.
//
// It is not a supervisor: it knows nothing of workloads' lifecycles.
package carriers

import (
	"sort"
	"strings"
)

// Environ merges layers of variables in order, the last occurrence of a key
// winning, and returns them as KEY=VALUE strings sorted by key, so that two
// builds of one spec give byte-identical environments.
func Environ(layers ...map[string]string) []string {
	merged := map[string]string{}
	for _, l := range layers {
		for k, v := range l {
			merged[k] = v
		}
	}
	keys := make([]string, 0, len(merged))
	for k := range merged {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	env := make([]string, len(keys))
	for i, k := range keys {
		env[i] = k + "=" + merged[k]
	}
	return env
}

// LookupEnv returns the value of key in env, the last occurrence winning, as
// execve's consumers read it.
func LookupEnv(env []string, key string) (string, bool) {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
			return v, true
		}
	}
	return "", false
}
