package registry

import (
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadOrCreateKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "registry.key")
	key, created, err := LoadOrCreateKey(path)
	if err != nil || !created {
		t.Fatalf("creating: created %v, %v", created, err)
	}
	if b, err := hex.DecodeString(key); err != nil || len(b) != 32 {
		t.Fatalf("key is not 32 hex-encoded bytes (%d chars)", len(key))
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v, %v", fi.Mode(), err)
	}
	again, created, err := LoadOrCreateKey(path)
	if err != nil || created || again != key {
		t.Fatalf("reading back: same key %v, created %v, %v", again == key, created, err)
	}
}

func TestLoadKeyRefusals(t *testing.T) {
	const secret = "s3cr3t-value"
	tests := []struct {
		name    string
		content string
		mode    os.FileMode
		dir     bool
		msg     string
	}{
		{"readable by others", secret, 0o644, false, "group or others"},
		{"readable by group", secret, 0o640, false, "group or others"},
		{"empty", " \n\t", 0o600, false, "empty"},
		{"two words", secret + " " + secret, 0o600, false, "one line"},
		{"too big", strings.Repeat("a", maxKeyFile+1), 0o600, false, "over"},
		{"directory", "", 0o700, true, "not a regular file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "key")
			if tt.dir {
				if err := os.Mkdir(path, tt.mode); err != nil {
					t.Fatal(err)
				}
			} else if err := os.WriteFile(path, []byte(tt.content), 0o600); err != nil {
				t.Fatal(err)
			} else if err := os.Chmod(path, tt.mode); err != nil {
				t.Fatal(err)
			}
			_, _, err := LoadOrCreateKey(path)
			if err == nil || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("%v; want an error saying %q", err, tt.msg)
			}
			if strings.Contains(err.Error(), secret) {
				t.Fatalf("the error holds the key: %v", err)
			}
		})
	}
	good := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(good, []byte("\n  "+secret+"\n"), 0o400); err != nil {
		t.Fatal(err)
	}
	if key, created, err := LoadOrCreateKey(good); err != nil || created || key != secret {
		t.Fatalf("trimmed key: %v created %v", err, created)
	}
}
