package registry

import (
	"flag"
	"net/http"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// R8: the export is koder-service-ports.toml, byte for byte.
func TestR8ExportGolden(t *testing.T) {
	eachStore(t, func(t *testing.T, st storeKind) {
		h := newHarnessOn(t, st)
		// Registered out of order: the export sorts.
		for _, b := range []string{
			`{"name":"voice","address":"10.0.0.7","port":8443,"metadata":{"jet.domain":"voice.koder.dev","container":"voice-1","service":"voice"}}`,
			`{"name":"dns","address":"10.0.0.2","port":53,"protocol":"udp","tags":["container=dns"]}`,
			`{"name":"voice","address":"10.0.0.8","port":8080,"tags":["jet.domain=voice.koder.dev"],"healthy":false}`,
			`{"name":"dns","address":"10.0.0.2","port":5353,"metadata":{"service":"mdns"}}`,
			`{"id":"odd\"one","name":"we\\ird","address":"h\tx","port":1,"metadata":{"container":"é\u0001"}}`,
			`{"name":"gone","address":"h","port":2,"ttl_ns":1}`,
		} {
			h.register(b)
		}
		h.lapse("gone-h-2") // not exported
		w := h.must(http.StatusOK, http.MethodGet, PathExport, "")
		if ct := w.Header().Get("Content-Type"); ct != "application/toml; charset=utf-8" {
			t.Fatalf("Content-Type %q", ct)
		}
		got := w.Body.String()
		golden := filepath.Join("testdata", "export.golden.toml")
		if *update {
			if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatal(err)
		}
		if got != string(want) {
			t.Fatalf("export differs from %s (go test -update rewrites it):\n%s", golden, got)
		}
		// Same registry, same bytes: nothing in it depends on time or order.
		h.clk.Add(10)
		if again := h.must(http.StatusOK, http.MethodGet, PathExport, "").Body.String(); again != got {
			t.Fatalf("a second export differs:\n%s", again)
		}
		if healthy := h.must(http.StatusOK, http.MethodGet, PathExport+"?healthy_only=1", "").Body.String(); healthy == got {
			t.Fatal("?healthy_only=1 kept the unhealthy instance")
		}
	})
}

func TestR8ExportEmpty(t *testing.T) {
	eachStore(t, func(t *testing.T, st storeKind) {
		got := newHarnessOn(t, st).must(http.StatusOK, http.MethodGet, PathExport, "").Body.String()
		if got != exportHeader {
			t.Fatalf("empty export:\n%s", got)
		}
	})
}

func TestTOMLString(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain", `"plain"`},
		{`a"b\c`, `"a\"b\\c"`},
		{"tab\tnl\ncr\r", `"tab\tnl\ncr\r"`},
		{"\x00\x1f\x7f", `"\u0000\u001F\u007F"`},
		{"bad\xffutf8", "\"bad\uFFFDutf8\""},
		{"ünïcødé ✓", `"ünïcødé ✓"`},
	}
	for _, tt := range tests {
		if got := tomlString(tt.in); got != tt.want {
			t.Errorf("tomlString(%q) = %s; want %s", tt.in, got, tt.want)
		}
	}
}
