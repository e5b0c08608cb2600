package schema

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"go.yaml.in/yaml/v3"
)

// docFiles are the repository's documentation: README.md and docs/*.md.
func docFiles(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{"../README.md"}, docs...)
}

// example is a spec file shown in the documentation.
type example struct {
	where string // file:line
	text  string
}

var (
	fence   = regexp.MustCompile("^(\\s*)(```+|~~~+)\\s*([A-Za-z0-9_+-]*)")
	heredoc = regexp.MustCompile(`(?m)^[^\n]*\S+\.(?:ya?ml|json)\b[^\n]*<<-?\s*'?"?([A-Za-z_]+)'?"?[^\n]*\n((?s:.*?))\n[ \t]*([A-Za-z_]+)[ \t]*$`)
)

// examples are the YAML and JSON blocks of a Markdown file, and the spec
// files its shell blocks write with a here-document (cat > web.yaml <<YAML).
func examples(t *testing.T, path string) []example {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []example
	lines := strings.Split(string(data), "\n")
	for i := 0; i < len(lines); i++ {
		m := fence.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		start, lang := i, strings.ToLower(m[3])
		var body []string
		for i++; i < len(lines) && !strings.HasPrefix(strings.TrimSpace(lines[i]), m[2]); i++ {
			body = append(body, strings.TrimPrefix(lines[i], m[1]))
		}
		text := strings.Join(body, "\n") + "\n"
		where := fmt.Sprintf("%s:%d", filepath.Base(path), start+1)
		switch lang {
		case "yaml", "yml", "json":
			out = append(out, example{where, text})
		case "sh", "bash", "shell", "console":
			for _, h := range heredoc.FindAllStringSubmatchIndex(text, -1) {
				if text[h[2]:h[3]] != text[h[6]:h[7]] {
					continue
				}
				line := start + 2 + strings.Count(text[:h[4]], "\n")
				out = append(out, example{fmt.Sprintf("%s:%d", filepath.Base(path), line), text[h[4]:h[5]] + "\n"})
			}
		}
	}
	return out
}

// isSpec says whether an example is a flyd spec file: every document of
// it (or item, of a list) is a mapping with a name, as every flyd
// document has. A compose file, the daemon's flyd.yaml or an API answer
// is not one.
func isSpec(text string) bool {
	var docs []any
	dec := yaml.NewDecoder(strings.NewReader(text))
	for {
		var v any
		if err := dec.Decode(&v); err != nil {
			break
		}
		if l, ok := v.([]any); ok {
			docs = append(docs, l...)
		} else if v != nil {
			docs = append(docs, v)
		}
	}
	for _, d := range docs {
		m, ok := d.(map[string]any)
		if !ok || m["name"] == nil {
			return false
		}
	}
	return len(docs) > 0
}

// TestExamplesAreValid checks every spec file the documentation shows
// against the schema and the parser: an example is read as flyd apply
// reads it, and an editor judges it as flyd does.
func TestExamplesAreValid(t *testing.T) {
	n := 0
	for _, path := range docFiles(t) {
		for _, ex := range examples(t, path) {
			if !isSpec(ex.text) {
				t.Logf("%s: not a spec file, skipped", ex.where)
				continue
			}
			n++
			if err := parse(ex.text); err != nil {
				t.Errorf("%s: flyd refuses the example: %v", ex.where, err)
			}
			if err := validate(t, ex.text); err != nil {
				t.Errorf("%s: the schema refuses the example: %v", ex.where, err)
			}
		}
	}
	if n == 0 {
		t.Fatal("no example found in README.md")
	}
	t.Logf("%d examples", n)
}

var (
	mdLink     = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	inlineCode = regexp.MustCompile("`[^`]*`")
	heading    = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*\s*$`)
)

// TestLinksResolve checks every relative link of the documentation: its
// file exists and its #anchor is a heading of that file.
func TestLinksResolve(t *testing.T) {
	anchors := map[string]map[string]bool{}
	anchorsOf := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		a := headingAnchors(t, path)
		anchors[path] = a
		return a
	}
	links := 0
	for _, path := range docFiles(t) {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		inFence := ""
		for i, line := range strings.Split(string(data), "\n") {
			if m := fence.FindStringSubmatch(line); m != nil {
				switch {
				case inFence == "":
					inFence = m[2]
				case strings.HasPrefix(strings.TrimSpace(line), inFence):
					inFence = ""
				}
				continue
			}
			if inFence != "" {
				continue
			}
			for _, m := range mdLink.FindAllStringSubmatch(inlineCode.ReplaceAllString(line, ""), -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				links++
				file, anchor, _ := strings.Cut(target, "#")
				where := fmt.Sprintf("%s:%d: %s", filepath.Base(path), i+1, target)
				dest := path
				if file != "" {
					dest = filepath.Join(filepath.Dir(path), file)
					if _, err := os.Stat(dest); err != nil {
						t.Errorf("%s: no such file", where)
						continue
					}
				}
				if anchor != "" {
					if !strings.HasSuffix(dest, ".md") {
						t.Errorf("%s: an anchor in a file that is not Markdown", where)
					} else if !anchorsOf(dest)[anchor] {
						t.Errorf("%s: %s has no heading #%s", where, filepath.Base(dest), anchor)
					}
				}
			}
		}
	}
	t.Logf("%d relative links", links)
}

// headingAnchors are the anchors GitHub gives a Markdown file's headings:
// lower case, punctuation dropped, spaces made '-', a repeated one
// numbered -1, -2….
func headingAnchors(t *testing.T, path string) map[string]bool {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	seen := map[string]int{}
	inFence := ""
	for _, line := range strings.Split(string(data), "\n") {
		if m := fence.FindStringSubmatch(line); m != nil {
			switch {
			case inFence == "":
				inFence = m[2]
			case strings.HasPrefix(strings.TrimSpace(line), inFence):
				inFence = ""
			}
			continue
		}
		m := heading.FindStringSubmatch(line)
		if inFence != "" || m == nil {
			continue
		}
		slug := slugify(m[2])
		if k := seen[slug]; k > 0 {
			out[fmt.Sprintf("%s-%d", slug, k)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	}
	return out
}

func slugify(title string) string {
	// A link's text stays, its target goes: [text](url) is text.
	title = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`).ReplaceAllString(title, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(title) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}
