package compose

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Compose's loader names a bad field by its path in the merged model
// (services.web.ports, 'services[web].healthcheck.interval') and, for
// its schema, by the file; these find the path and say its file and line.
var (
	schemaErr   = regexp.MustCompile(`^validating (.+?): ((?:services|networks|volumes|secrets|configs)\S*) (.*)$`)
	decodeErr   = regexp.MustCompile(`^'([^']+)' (.*)$`)
	interpolErr = regexp.MustCompile(`^error while interpolating (\S+): (.*)$`)
	// A port's address is refused without its path.
	portIPErr    = regexp.MustCompile(`^Invalid ip address:? (\S+)`)
	bracketIndex = regexp.MustCompile(`\[([^\]]+)\]`)
)

// located is compose's error about files, each bad field it names given
// as FILE:LINE: PATH: MESSAGE where the files hold that path; any other
// error as it was, after the files' names.
func located(err error, files []string) error {
	msg := err.Error()
	var out []string
	switch m := schemaErr.FindStringSubmatch(msg); {
	case m != nil:
		why := m[3]
		if why == "false schema" {
			why = "compose does not know this field"
		}
		out = append(out, at([]string{m[1]}, m[2], why))
	case strings.HasPrefix(msg, "decoding failed"):
		for _, l := range strings.Split(msg, "\n") {
			if d := decodeErr.FindStringSubmatch(strings.TrimSpace(l)); d != nil {
				out = append(out, at(files, bracketIndex.ReplaceAllString(d[1], ".$1"), d[2]))
			}
		}
	default:
		if i := interpolErr.FindStringSubmatch(msg); i != nil {
			out = append(out, at(files, i[1], i[2]))
		} else if i := portIPErr.FindStringSubmatch(msg); i != nil {
			if p := portWith(files, i[1]); p != "" {
				out = append(out, at(files, p, msg))
			}
		}
	}
	if len(out) == 0 {
		return fmt.Errorf("%s: %w", strings.Join(relAll(files), ", "), err)
	}
	return errors.New(strings.Join(out, "\n"))
}

// portWith is the path (services.NAME.ports.I) of the first port written
// as a string with the address ip, in the last of files that has one.
func portWith(files []string, ip string) string {
	raw := readRaw(files)
	for i := len(raw) - 1; i >= 0; i-- {
		names := slices.Sorted(maps.Keys(raw[i].services))
		for _, name := range names {
			ports, _ := raw[i].services[name]["ports"].([]any)
			for j, p := range ports {
				if s, ok := p.(string); ok && strings.HasPrefix(s, ip+":") {
					return fmt.Sprintf("services.%s.ports.%d", name, j)
				}
			}
		}
	}
	return ""
}

// at is "FILE:LINE: PATH: why" for the last of files that has path, or
// "FILES: PATH: why" when none does.
func at(files []string, path, why string) string {
	for i := len(files) - 1; i >= 0; i-- {
		if line := lineOf(files[i], strings.Split(path, ".")); line > 0 {
			return fmt.Sprintf("%s:%d: %s: %s", rel(files[i]), line, path, why)
		}
	}
	return fmt.Sprintf("%s: %s: %s", strings.Join(relAll(files), ", "), path, why)
}

// lineOf is the line of the key (or item) at path in a YAML file, 0 when
// the file does not have it.
func lineOf(file string, path []string) int {
	data, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	var doc yaml.Node
	if yaml.Unmarshal(data, &doc) != nil || len(doc.Content) == 0 {
		return 0
	}
	n, line := doc.Content[0], 0
	for _, seg := range path {
		for n.Kind == yaml.AliasNode && n.Alias != nil {
			n = n.Alias
		}
		switch n.Kind {
		case yaml.MappingNode:
			found := false
			for k := 0; k+1 < len(n.Content); k += 2 {
				if n.Content[k].Value == seg {
					line, n, found = n.Content[k].Line, n.Content[k+1], true
					break
				}
			}
			if !found {
				return 0
			}
		case yaml.SequenceNode:
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || i >= len(n.Content) {
				return 0
			}
			n = n.Content[i]
			line = n.Line
		default:
			return 0
		}
	}
	return line
}

func relAll(files []string) []string {
	out := make([]string, len(files))
	for i, f := range files {
		out[i] = rel(f)
	}
	return out
}
