package specload

import (
	"bytes"
	"os"
	"path/filepath"
)

// Compose files are told from flyd's own here, without reading them as
// compose does (package compose, which links compose's loader): a client
// that meets one hands it to the program that reads it.

// ComposeFileNames are the names of a compose file in a directory, in the order
// docker compose looks for them.
var ComposeFileNames = []string{"compose.yaml", "compose.yml", "docker-compose.yml", "docker-compose.yaml"}

// ComposeOverrideNames are the names of the override file read after it, as
// docker compose reads the first of them that is there.
var ComposeOverrideNames = []string{"compose.override.yml", "compose.override.yaml", "docker-compose.override.yml", "docker-compose.override.yaml"}

// ComposeFilesIn is the compose file of directory dir and its override file, if
// it has one: nil when dir holds no compose file.
func ComposeFilesIn(dir string) []string {
	for _, n := range ComposeFileNames {
		f := filepath.Join(dir, n)
		if fi, err := os.Stat(f); err == nil && fi.Mode().IsRegular() {
			out := []string{f}
			for _, o := range ComposeOverrideNames {
				of := filepath.Join(dir, o)
				if fi, err := os.Stat(of); err == nil && fi.Mode().IsRegular() {
					return append(out, of)
				}
			}
			return out
		}
	}
	return nil
}

// IsComposeFile says whether path is a compose file: one of compose's names
// (ComposeFileNames, ComposeOverrideNames), or a YAML file whose top level has
// `services:`, which no flyd document has.
func IsComposeFile(path string) bool {
	base := filepath.Base(path)
	for _, n := range append(ComposeFileNames[:len(ComposeFileNames):len(ComposeFileNames)], ComposeOverrideNames...) {
		if base == n {
			return true
		}
	}
	switch filepath.Ext(base) {
	case ".yaml", ".yml":
	default:
		return false
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	return HasServices(data)
}

// HasServices says whether YAML data has `services:` at the top level of
// a document.
func HasServices(data []byte) bool {
	for line := range bytes.SplitSeq(data, []byte("\n")) {
		if bytes.HasPrefix(line, []byte("services:")) {
			return true
		}
	}
	return false
}
