package carriers

import (
	"slices"
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
