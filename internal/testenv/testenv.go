// Package testenv holds the one rule every flyd test follows when the
// machine lacks what a test needs: skip with the reason on a developer's
// machine, fail under CI=true, where a skip would be a hole in the
// coverage nobody sees. It is for tests only.
package testenv

import (
	"os"
	"testing"
)

// Skip skips the test with why, or fails it under CI=true.
func Skip(tb testing.TB, why string) {
	tb.Helper()
	if os.Getenv("CI") == "true" {
		tb.Fatalf("%s (CI=true: not running this test is a failure)", why)
	}
	tb.Skip(why)
}

// RequireRoot skips (or, under CI=true, fails) a test run without root;
// why says what needs it.
func RequireRoot(tb testing.TB, why string) {
	tb.Helper()
	if os.Geteuid() != 0 {
		Skip(tb, why)
	}
}

// InotifyInstances counts this process's inotify instances: a test of a
// watch that must leave none behind.
func InotifyInstances(tb testing.TB) int {
	tb.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		tb.Fatal(err)
	}
	n := 0
	for _, fd := range fds {
		if l, _ := os.Readlink("/proc/self/fd/" + fd.Name()); l == "anon_inode:inotify" {
			n++
		}
	}
	return n
}
