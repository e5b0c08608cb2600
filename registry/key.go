package registry

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// maxKeyFile bounds what is read from a key file: a key is a line.
const maxKeyFile = 4 << 10

// LoadOrCreateKey returns the API key kept in path, creating the file (0600,
// 32 random bytes hex-encoded) when it does not exist. It refuses a key file
// that group or others may access, or that holds no key. No error carries
// the key.
func LoadOrCreateKey(path string) (key string, created bool, err error) {
	key, err = readKeyFile(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return key, false, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", false, fmt.Errorf("creating the key file's directory: %w", err)
	}
	raw := make([]byte, 32)
	_, _ = rand.Read(raw) // never fails (crypto/rand panics instead)
	key = hex.EncodeToString(raw)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		// Another process created it meanwhile: use that one.
		key, err = readKeyFile(path)
		return key, false, err
	}
	if err != nil {
		return "", false, fmt.Errorf("creating key file: %w", err)
	}
	_, err = f.WriteString(key + "\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return "", false, fmt.Errorf("writing key file %s: %w", path, err)
	}
	return key, true, nil
}

// readKeyFile reads a key file as registryclient does, with the same
// refusals, so that a key the server accepts is one its clients accept.
func readKeyFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("key file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("key file: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("key file %s is not a regular file", path)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return "", fmt.Errorf("key file %s is accessible by group or others (mode %04o): chmod 600 it", path, perm)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxKeyFile+1))
	if err != nil {
		return "", fmt.Errorf("key file %s: %w", path, err)
	}
	if len(b) > maxKeyFile {
		return "", fmt.Errorf("key file %s is over %d bytes: it should hold one key", path, maxKeyFile)
	}
	key := strings.TrimSpace(string(b))
	switch {
	case key == "":
		return "", fmt.Errorf("key file %s is empty", path)
	case strings.ContainsFunc(key, func(r rune) bool { return r < 0x21 || r == 0x7f }):
		return "", fmt.Errorf("key file %s holds more than one word or control characters: a key is one line without spaces", path)
	}
	return key, nil
}
