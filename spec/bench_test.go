package spec

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"
)

// BenchmarkDecode is a spec's decode with defaults and validation: the
// contract's example (every section set) and the smallest useful spec,
// from YAML as the CLI reads files and from JSON as the daemon reads the
// API's bodies.
func BenchmarkDecode(b *testing.B) {
	full, err := os.ReadFile("testdata/api-server.yaml")
	if err != nil {
		b.Fatal(err)
	}
	fullJSON, err := os.ReadFile("testdata/api-server.json")
	if err != nil {
		b.Fatal(err)
	}
	small := []byte("name: w1\ncommand: [\"/bin/sh\", \"/srv/idle.sh\"]\nrestart: {policy: never}\n")
	smallJSON, err := json.Marshal(map[string]any{"name": "w1", "command": []string{"/bin/sh", "/srv/idle.sh"}, "restart": map[string]string{"policy": "never"}})
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		data   []byte
		decode func([]byte) error
	}{
		{"yaml/full", full, func(d []byte) error { _, err := Parse(d); return err }},
		{"yaml/small", small, func(d []byte) error { _, err := Parse(d); return err }},
		{"json/full", fullJSON, func(d []byte) error { _, err := DecodeJSON(bytes.NewReader(d)); return err }},
		{"json/small", smallJSON, func(d []byte) error { _, err := DecodeJSON(bytes.NewReader(d)); return err }},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.data)))
			b.ReportAllocs()
			for b.Loop() {
				if err := c.decode(c.data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
