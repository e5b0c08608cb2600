package flydtest

import (
	"regexp"
	"strings"
	"testing"

	"github.com/flyd-dev/flyd/spec"
)

// TestProjectName: a test's project is a DNS label whatever the test is
// called, at most 63 long, and two of one test differ.
func TestProjectName(t *testing.T) {
	suffix := regexp.MustCompile(`-[0-9a-f]{6}$`)
	for test, prefix := range map[string]string{
		"TestCheckout":                    "testcheckout-",
		"TestCheckout/with_coupon#01":     "testcheckout-with-coupon-01-",
		"Test/" + strings.Repeat("x", 80): "test-" + strings.Repeat("x", 45) + "-",
		"/":                               "t-",
	} {
		a, b := ProjectName(test), ProjectName(test)
		if !spec.ValidProject(a) || len(a) > 63 || !strings.HasPrefix(a, prefix) || !suffix.MatchString(a) {
			t.Errorf("ProjectName(%q) = %q; want a DNS label %q + 6 hex digits", test, a, prefix)
		}
		if a == b {
			t.Errorf("ProjectName(%q) twice = %q both times", test, a)
		}
	}
}
