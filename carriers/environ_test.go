package carriers

import (
	"os"
	"slices"
	"strings"
	"testing"
)

func TestBuildPrecedenceAndOrder(t *testing.T) {
	own := map[string]string{"FLYD_WORKLOAD": "api", "PATH": "/bin"}
	env := map[string]string{"PATH": "/opt/bin", "LOG": "debug", "DB_PASSWORD": "inline"}
	secret := map[string]string{"DB_PASSWORD": "s3cret"}
	got, files := Build(own, env, secret)
	if len(files) != 0 {
		t.Fatalf("small values went to %d files", len(files))
	}
	want := []string{"DB_PASSWORD=s3cret", "FLYD_WORKLOAD=api", "LOG=debug", "PATH=/opt/bin"}
	if !slices.Equal(got, want) {
		t.Fatalf("Build = %q, want %q", got, want)
	}
	if v, ok := LookupEnv(got, "PATH"); !ok || v != "/opt/bin" {
		t.Fatalf("LookupEnv(PATH) = %q, %v", v, ok)
	}
	if _, ok := LookupEnv(got, "NOPE"); ok {
		t.Fatal("Lookup found a key that is not there")
	}
	if v, _ := LookupEnv([]string{"A=1", "A=2"}, "A"); v != "2" {
		t.Fatalf("Lookup must return the last occurrence, got %q", v)
	}
}

// TestBuildCarriesOnlyCodeflyValues: a large value of codefly's namespace
// goes by file, and comes back under its own key from Resolve; a large
// value of the program's own stays inline, as the program reads it.
func TestBuildCarriesOnlyCodeflyValues(t *testing.T) {
	big := strings.Repeat("v", FileCarrierThreshold+1)
	inline, files := Build(map[string]string{"JAVA_OPTS": big, "CODEFLY__WORKSPACE_CONFIGURATION__DB__URL": big})
	if len(files) != 1 || files[0].Key != "CODEFLY__WORKSPACE_CONFIGURATION__DB__URL" {
		t.Fatalf("files %v; want the codefly value alone", files)
	}
	if v, ok := LookupEnv(inline, "JAVA_OPTS"); !ok || v != big {
		t.Fatal("JAVA_OPTS is not inline")
	}
	dir := t.TempDir()
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	entries, err := Write(dir, os.Getuid(), os.Getgid(), files)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Resolve(append(inline, entries...), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"JAVA_OPTS", "CODEFLY__WORKSPACE_CONFIGURATION__DB__URL"} {
		if v, ok := LookupEnv(got, key); !ok || v != big {
			t.Errorf("%s after Resolve: present %v, %d bytes; want its value", key, ok, len(v))
		}
	}
}
