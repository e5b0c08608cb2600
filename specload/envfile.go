package specload

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/joho/godotenv"
)

// MaxEnvFile bounds an env file, as spec files are bounded.
const MaxEnvFile = 1 << 20

// ParseEnv reads the content of an env file in godotenv's format, the one
// compose's files share: KEY=VALUE lines, # comments, `export ` before a
// key taken off; single quotes keep a value as written, double quotes take
// \n escapes, and in an unquoted or double-quoted value ${KEY} is a key
// set above it in the same file (never the environment). name names the
// file in errors, which give the line, never the text: a value may be a
// secret.
func ParseEnv(name string, data []byte) (map[string]string, error) {
	if len(data) > MaxEnvFile {
		return nil, fmt.Errorf("%s: over %d bytes", name, MaxEnvFile)
	}
	vars, err := godotenv.UnmarshalBytes(data)
	if err != nil {
		if line := badLine(data); line > 0 {
			return nil, fmt.Errorf("%s: line %d: not KEY=VALUE, or a quote not closed", name, line)
		}
		return nil, fmt.Errorf("%s: not KEY=VALUE lines, or a quote not closed", name)
	}
	for k := range vars {
		if nameLen(k) != len(k) || k == "" {
			// Not quoted: a line without '=' may be a value.
			where := name
			if line := badKeyLine(data); line > 0 {
				where = fmt.Sprintf("%s: line %d", name, line)
			}
			return nil, fmt.Errorf("%s: a variable name must be letters, digits and '_', not starting with a digit, then '='", where)
		}
	}
	return vars, nil
}

// badKeyLine is the line of the first bad variable name: the end of the
// shortest run of whole lines that parses to one. 0 in a large file.
func badKeyLine(data []byte) int {
	lines := bytes.SplitAfter(data, []byte("\n"))
	if len(lines) > 2000 {
		return 0
	}
	end := 0
	for i, l := range lines {
		end += len(l)
		vars, err := godotenv.UnmarshalBytes(data[:end])
		if err != nil {
			continue
		}
		for k := range vars {
			if nameLen(k) != len(k) || k == "" {
				return i + 1
			}
		}
	}
	return 0
}

// badLine finds the line of a parse error: the one after the longest run
// of whole lines that parses. godotenv's own message quotes the text, so it
// is never shown. Only small files are searched (each try parses again).
func badLine(data []byte) int {
	lines := bytes.SplitAfter(data, []byte("\n"))
	if len(lines) > 2000 {
		return 0
	}
	good, end := 0, 0
	for i, l := range lines {
		end += len(l)
		if _, err := godotenv.UnmarshalBytes(data[:end]); err == nil {
			good = i + 1
		}
	}
	return min(good+1, len(lines))
}

// ReadEnvFile reads and parses the env file at path.
func ReadEnvFile(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadEnv(path, f)
}

// ReadEnv reads and parses an open env file, bounded; name names it.
func ReadEnv(name string, r io.Reader) (map[string]string, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxEnvFile+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return ParseEnv(name, data)
}

// Layered looks a variable up in each layer in turn: the first that has
// it gives its value.
func Layered(layers ...map[string]string) Lookup {
	return func(name string) (string, bool) {
		for _, l := range layers {
			if v, ok := l[name]; ok {
				return v, true
			}
		}
		return "", false
	}
}

// Environ makes a layer of an environment's KEY=VALUE strings.
func Environ(env []string) map[string]string {
	m := make(map[string]string, len(env))
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
			m[k] = v
		}
	}
	return m
}

// ClientVars are the variables of the spec files of dir as a client reads
// them, in compose's order: the process environment first, then the
// envFiles (--env-file; a later one over an earlier), or, when no envFile
// is given, the .env file of dir if there is one.
func ClientVars(environ []string, envFiles []string, dir string) (Lookup, error) {
	layers := []map[string]string{Environ(environ)}
	files := make([]map[string]string, 0, len(envFiles))
	for _, p := range envFiles {
		vars, err := ReadEnvFile(p)
		if err != nil {
			return nil, fmt.Errorf("--env-file: %w", err)
		}
		files = append(files, vars)
	}
	for i := len(files) - 1; i >= 0; i-- {
		layers = append(layers, files[i])
	}
	if len(envFiles) == 0 {
		vars, err := ReadEnvFile(filepath.Join(dir, ".env"))
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return nil, err
		default:
			layers = append(layers, vars)
		}
	}
	return Layered(layers...), nil
}
