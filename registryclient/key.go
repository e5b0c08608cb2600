package registryclient

import (
	"fmt"
	"io"
	"os"
	"strings"
)

// maxKeyFile bounds what is read from a key file: a key is a line.
const maxKeyFile = 4 << 10

// ReadKey reads an API key from a file: the file's content without
// surrounding white space. It refuses a file that group or others may
// access (the key would not be a secret), an empty one, and one holding
// more than a single word. No error carries the key.
func ReadKey(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("registry key file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("registry key file: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("registry key file %s is not a regular file", path)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return "", fmt.Errorf("registry key file %s is accessible by group or others (mode %04o): chmod 600 it", path, perm)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxKeyFile+1))
	if err != nil {
		return "", fmt.Errorf("registry key file %s: %w", path, err)
	}
	if len(b) > maxKeyFile {
		return "", fmt.Errorf("registry key file %s is over %d bytes: it should hold one key", path, maxKeyFile)
	}
	key := strings.TrimSpace(string(b))
	switch {
	case key == "":
		return "", fmt.Errorf("registry key file %s is empty", path)
	case strings.ContainsFunc(key, func(r rune) bool { return r < 0x21 || r == 0x7f }):
		return "", fmt.Errorf("registry key file %s holds white space or control characters inside the key: a key is one word", path)
	}
	return key, nil
}
