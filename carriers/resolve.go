package carriers

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// MaxFileCarrierBytes caps a file carrier a reader accepts.
const MaxFileCarrierBytes = 16 << 20

// ErrCarrier is wrapped by every refusal of the reader side. A carrier that
// cannot be read is an error, never an absent value: an unreadable
// credential must not read as an unset one.
var ErrCarrier = errors.New("file carrier refused")

// Resolve returns env with every CODEFLY__FILE__<NAME>=<path> entry replaced
// by CODEFLY__<NAME>=<the file's content>, the form codefly's readers use.
// Entries are refused when the path is relative, not a regular file, empty,
// over MaxFileCarrierBytes, or unreadable, when the value is also delivered
// inline, and when a secret (secret reports which keys are) is readable by
// others. With secret nil, the key's namespace says (IsSecret), as codefly
// core decides.
func Resolve(env []string, secret func(key string) bool) ([]string, error) {
	if secret == nil {
		secret = IsSecret
	}
	inline := map[string]bool{}
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(k, FilePrefix) {
			inline[k] = true
		}
	}
	out := make([]string, 0, len(env))
	for _, kv := range env {
		k, path, _ := strings.Cut(kv, "=")
		name, ok := strings.CutPrefix(k, FilePrefix)
		if !ok {
			out = append(out, kv)
			continue
		}
		key := Prefix + name
		if inline[key] || inline[name] {
			return nil, fmt.Errorf("%w: %s is delivered both inline and by file", ErrCarrier, key)
		}
		value, err := ReadFile(path, secret(key))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
		out = append(out, key+"="+value)
	}
	return out, nil
}

// IsSecret says whether a key is of one of codefly's secret namespaces:
// a service's or the workspace's secret configuration.
func IsSecret(key string) bool {
	return strings.HasPrefix(key, Prefix+"SERVICE_SECRET_CONFIGURATION__") ||
		strings.HasPrefix(key, Prefix+"WORKSPACE_SECRET_CONFIGURATION__")
}

// Lookup returns the value of key from env whichever carrier delivered it:
// inline, or by the file its CODEFLY__FILE__ entry names.
func Lookup(env []string, key string, secret bool) (string, bool, error) {
	v, inlineOK := LookupEnv(env, key)
	path, fileOK := LookupEnv(env, FileKey(key))
	switch {
	case inlineOK && fileOK:
		return "", false, fmt.Errorf("%w: %s is delivered both inline and by file", ErrCarrier, key)
	case inlineOK:
		return v, true, nil
	case !fileOK:
		return "", false, nil
	}
	v, err := ReadFile(path, secret)
	if err != nil {
		return "", false, fmt.Errorf("%s: %w", FileKey(key), err)
	}
	return v, true, nil
}

// ReadFile reads one carrier. The checks are made on the open descriptor,
// so the file cannot be swapped between check and read.
func ReadFile(path string, secret bool) (string, error) {
	if !filepath.IsAbs(path) {
		return "", fmt.Errorf("%w: path %q is relative", ErrCarrier, path)
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", fmt.Errorf("%w: %s: %v", ErrCarrier, path, err)
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return "", fmt.Errorf("%w: %s: %v", ErrCarrier, path, err)
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return "", fmt.Errorf("%w: %s is not a regular file", ErrCarrier, path)
	case st.Size == 0:
		return "", fmt.Errorf("%w: %s is empty (a truncated write?)", ErrCarrier, path)
	case st.Size > MaxFileCarrierBytes:
		return "", fmt.Errorf("%w: %s is %d bytes, over %d", ErrCarrier, path, st.Size, MaxFileCarrierBytes)
	case secret && st.Mode&0o007 != 0:
		return "", fmt.Errorf("%w: %s holds a secret and is accessible by others (mode %#o)", ErrCarrier, path, st.Mode&0o777)
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxFileCarrierBytes+1))
	if err != nil {
		return "", fmt.Errorf("%w: %s: %v", ErrCarrier, path, err)
	}
	if len(b) > MaxFileCarrierBytes {
		return "", fmt.Errorf("%w: %s grew over %d bytes", ErrCarrier, path, MaxFileCarrierBytes)
	}
	return string(b), nil
}
