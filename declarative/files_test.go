package declarative

import "testing"

func TestIsSpecFile(t *testing.T) {
	for _, tc := range []struct {
		name string
		want bool
	}{
		{"api.yaml", true},
		{"api.yml", true},
		{"api.json", true},
		{"api.yaml~", false},     // vim and emacs backup
		{".api.yaml.swp", false}, // vim swap
		{"4913", false},          // vim's probe of the directory
		{".#api.yaml", false},    // emacs lock
		{"#api.yaml#", false},    // emacs autosave
		{".api.yaml.tmp", false}, // atomic write in progress
		{".hidden.yaml", false},
		{"api.yaml.bak", false},
		{"README.md", false},
		{"api.YAML", false}, // the same rule as `flyd apply DIR`
	} {
		if got := isSpecFile(tc.name); got != tc.want {
			t.Errorf("isSpecFile(%q) = %v, want %v", tc.name, got, tc.want)
		}
	}
}
