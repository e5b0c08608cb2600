// Package carriers builds and checks what reaches exec: a workload's
// environment, in a fixed order of precedence and in a normal form, so that
// what is measured before exec is exactly what the kernel will be given;
// the file carriers a value too large or too secret for the environment
// goes in instead (Write, Pointers; their Root, a directory per run, swept
// of those no live run owns), and the reader a workload's Go code uses to
// read them back (Lookup, Resolve); and the kernel's exec limits, checked
// before exec (CheckExec).
//
// It is not a supervisor: it knows nothing of workloads' lifecycles, nor
// of where a value comes from (package wiring gathers them).
package carriers

import (
	"sort"
	"strings"
)

// Build merges layers of variables in order, the last occurrence of a key
// winning, and sorts them by key, so that two builds of one spec give
// byte-identical environments. Values of codefly's namespace (CODEFLY__…)
// larger than FileCarrierThreshold go to files, which codefly's readers
// resolve (CODEFLY__FILE__<NAME> names CODEFLY__<NAME>'s file); every other
// value stays a KEY=VALUE string, since the program reads it directly (a
// JAVA_OPTS by file would read as unset), and one past the kernel's limit
// is refused by CheckExec, naming its key. A large value is never copied.
func Build(layers ...map[string]string) (inline []string, files []File) {
	n := 0
	for _, l := range layers {
		n += len(l)
	}
	merged := make(map[string]string, n)
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
	inline = make([]string, 0, len(keys))
	for _, k := range keys {
		v := merged[k]
		if len(v) > FileCarrierThreshold && strings.HasPrefix(k, Prefix) {
			files = append(files, File{Key: k, Value: v})
			continue
		}
		inline = append(inline, k+"="+v)
	}
	return inline, files
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
