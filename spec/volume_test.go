package spec

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseVolume(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want Volume
	}{
		{"/srv/src:/app", Volume{Source: "/srv/src", Target: "/app"}},
		{"/srv/src:/app:ro", Volume{Source: "/srv/src", Target: "/app", ReadOnly: true}},
		{"/srv/src:/app:rw", Volume{Source: "/srv/src", Target: "/app"}},
		{"/srv/src/:/app/", Volume{Source: "/srv/src", Target: "/app"}},
		{"/srv//a/../b:/x/./y", Volume{Source: "/srv/b", Target: "/x/y"}},
		{"/:/host:ro", Volume{Source: "/", Target: "/host", ReadOnly: true}},
		{"/etc/app.conf:/etc/app.conf:ro", Volume{Source: "/etc/app.conf", Target: "/etc/app.conf", ReadOnly: true}},
		{"data:/var/lib/data", Volume{Source: "data", Target: "/var/lib/data"}},
		{"pg-data:/var/lib/postgresql:ro", Volume{Source: "pg-data", Target: "/var/lib/postgresql", ReadOnly: true}},
		{"c:/codefly/src", Volume{Source: "c", Target: "/codefly/src"}},
	} {
		got, err := ParseVolume(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseVolume(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
		}
		if got.Named() != !strings.HasPrefix(tt.in, "/") {
			t.Errorf("ParseVolume(%q).Named() = %v", tt.in, got.Named())
		}
	}
}

func TestParseVolumeErrors(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"", "needs a source"},
		{"/data", "needs a source"},
		{"data", "needs a source"},
		{":/data", "the source is empty"},
		{"/a:/b:ro:x", "a path cannot hold ':'"},
		{"/a:/b:c:ro", "a path cannot hold ':'"},
		{"/a:/b:z", `the mode "z" must be ro or rw`},
		{"/a:/b:", `the mode "" must be ro or rw`},
		{"/a:/b:RO", `the mode "RO" must be ro or rw`},
		{"./src:/app", `the host path "./src" must be absolute`},
		{"../src:/app", `the host path "../src" must be absolute`},
		{"~/src:/app", `the host path "~/src" must be absolute`},
		{"Data:/d", `the volume name "Data" must be 1 to 63 lowercase`},
		{"my_data:/d", `the volume name "my_data" must be`},
		{"a.b:/d", `the volume name "a.b" must be`},
		{strings.Repeat("a", 64) + ":/d", "must be 1 to 63"},
		{"data:d", `the container path "d" must be absolute`},
		{"data:", `the container path "" must be absolute`},
		{"/a:/", "cannot be /"},
		{"/a:/x/..", "cannot be /"},
		{"data:/codefly/configuration", "would hide /codefly/configuration"},
		{"data:/codefly", "would hide /codefly/configuration"},
		{"data:/codefly/configuration/KEY", "would hide"},
		{"/a\x00:/b", "NUL"},
	} {
		_, err := ParseVolume(tt.in)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseVolume(%q) = %v, want an error with %q", tt.in, err, tt.want)
		}
	}
}

func TestValidateVolumes(t *testing.T) {
	ctr := func(vols ...string) *Workload {
		w := parseOne(t, "name: c\nkind: containerd\ncontainerd: {image: bbox}\n")
		w.Containerd.Volumes = vols
		return w
	}
	if err := ctr("/srv:/srv:ro", "data:/data", "cache:/root/.cache").Validate(); err != nil {
		t.Fatalf("valid volumes: %v", err)
	}
	wantFieldError(t, ctr("/srv:/data", "data:/data/").Validate(), []string{"containerd.volumes[1]"},
		"/data is already the container path of containerd.volumes[0]")
	wantFieldError(t, ctr("data:/a", "./x:/b", "x:/c:z").Validate(),
		[]string{"containerd.volumes[1]", "containerd.volumes[2]"}, `"./x" must be absolute`, `"z" must be ro or rw`)

	// Read from a file, as a user writes it.
	w := parseOne(t, "name: c\nkind: containerd\ncontainerd:\n  image: bbox\n  volumes: [\"/srv/src:/app:ro\", \"data:/var/lib/data\"]\n")
	if !reflect.DeepEqual(w.Containerd.Volumes, []string{"/srv/src:/app:ro", "data:/var/lib/data"}) {
		t.Errorf("volumes read as %q", w.Containerd.Volumes)
	}
	_, err := Parse([]byte("name: c\nkind: containerd\ncontainerd:\n  image: bbox\n  volumes: [\"src:app\"]\n"))
	wantFieldError(t, err, []string{"containerd.volumes[0]"}, `the container path "app" must be absolute`)
	_, err = Parse([]byte("name: c\nkind: containerd\ncontainerd:\n  image: bbox\n  volumes: {data: /d}\n"))
	wantFieldError(t, err, []string{"containerd.volumes"}, "expected a list")

	// A clone's volumes are its own.
	c := w.Clone()
	c.Containerd.Volumes[0] = "x:/x"
	if w.Containerd.Volumes[0] != "/srv/src:/app:ro" {
		t.Error("changing a clone's volumes changed the original's")
	}
	if Equal(w, c) {
		t.Error("workloads with other volumes are equal")
	}
}
