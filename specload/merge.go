package specload

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/flyd-dev/flyd/spec"
)

// Several -f of flyd's format are read as docker compose reads
// `-f compose.yaml -f compose.override.yaml`: a document of a later path
// with the kind and the name of one an earlier path holds changes the
// fields it sets of that one, instead of defining it twice.
//
// The rules, compose's:
//   - a mapping (env, secret_env, configuration, health, resources,
//     restart, stop, containerd, identity…) is merged key by key, the
//     later file's value winning;
//   - a scalar is replaced;
//   - a list is replaced (command, stop.exec, reload.exec, health.exec,
//     as compose replaces command, entrypoint and healthcheck.test),
//     except the lists compose merges: env_file, profiles, uses,
//     registry.tags and watch get the later file's entries appended, one
//     equal to an entry already there left out; after is merged by the
//     workload an entry names (as compose merges depends_on), endpoints
//     by name (an endpoint of the same name is merged key by key, as
//     compose merges a port by its key) and containerd.volumes by target
//     (as compose merges volumes): a later entry takes the place of the
//     earlier one with its key, the others are appended;
//   - a null value changes nothing; the tag !reset removes the field
//     (`env: !reset {}`), and !override replaces it whole where it would
//     be merged (`env_file: !override [prod.env]`), as compose's tags do.
//
// Each file's values are given their variables (its directory's .env) and
// its relative paths are resolved against its directory before the merge;
// the merged document is then parsed as strictly as one file's, and an
// error names the file and line of the field it concerns.

// ReadPaths reads what several -f name, each as ReadPath reads it, as one
// set of documents: a document of a later path with the kind and the name
// of one an earlier path holds is merged into it (the rules above). Two
// documents of one kind and name within one path (a file, or the files of
// a directory) are an error, as they are when it is read alone.
func (c Client) ReadPaths(paths []string) (*spec.Documents, error) {
	return c.ReadPathsOver(nil, "", paths)
}

// ReadPathsOver is ReadPaths after base, the workloads an earlier -f gave
// (a compose project's, named by baseName in messages): a workload of
// paths with the name of one of base is merged into it as into an earlier
// path's, and the result holds base's documents first, each where it was.
func (c Client) ReadPathsOver(base *spec.Documents, baseName string, paths []string) (*spec.Documents, error) {
	if base == nil && len(paths) == 1 {
		return c.ReadPath(paths[0])
	}
	sets := make([]pathSet, len(paths))
	data := make([][][]byte, len(paths))
	for i, p := range paths {
		s, err := c.pathSet(p)
		if err != nil {
			return nil, err
		}
		sets[i] = s
		for _, f := range s.files {
			b, err := c.readFile(f)
			if err != nil {
				return nil, err
			}
			data[i] = append(data[i], b)
		}
	}
	if !c.overlap(base, sets, data) {
		out := &spec.Documents{}
		if base != nil {
			out.Add(base)
		}
		for i, s := range sets {
			d, err := c.parseSet(s, data[i])
			if err != nil {
				return nil, err
			}
			out.Add(d)
		}
		return out, nil
	}
	return c.merged(base, baseName, sets, data)
}

// overlap says whether a document of one set has the kind and name of one
// of an earlier set, or of base's workloads, as read without reporting
// anything: what does not read is left to the parser, which says why.
func (c Client) overlap(base *spec.Documents, sets []pathSet, data [][][]byte) bool {
	seen := map[string]int{}
	bp := baseProject(base)
	if base != nil {
		for _, w := range base.Workloads {
			seen[workloadKey(w)] = -1
		}
	}
	for i, s := range sets {
		o, err := c.options(s.dir)
		if err != nil {
			return false
		}
		for j := range s.files {
			docs, err := yamlDocs(data[i][j])
			if err != nil {
				continue
			}
			for _, d := range docs {
				k := docKey(d, func(v string) string {
					out, _ := Expand(v, o.Vars, func(string) error { return nil })
					return out
				}, bp)
				if k == "" {
					continue
				}
				if at, ok := seen[k]; ok && at != i {
					return true
				}
				seen[k] = i
			}
		}
	}
	return false
}

// yamlDocs are the documents of a spec file's content: each non-empty
// YAML document, or each item of one that is a list.
func yamlDocs(data []byte) ([]*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var out []*yaml.Node
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("malformed YAML: %s", strings.TrimPrefix(err.Error(), "yaml: "))
		}
		if len(doc.Content) == 0 {
			continue
		}
		root := doc.Content[0]
		switch {
		case root.Kind == yaml.ScalarNode && root.ShortTag() == "!!null":
		case root.Kind == yaml.SequenceNode:
			out = append(out, root.Content...)
		default:
			out = append(out, root)
		}
	}
}

// docKey is what a document is merged by: its kind's name (workload for
// every runtime's) and its full name, in project when it states none; ""
// when it has no name to read.
func docKey(d *yaml.Node, expand func(string) string, project string) string {
	if d.Kind != yaml.MappingNode {
		return ""
	}
	var kind, name, stated string
	for i := 0; i+1 < len(d.Content); i += 2 {
		v := d.Content[i+1]
		if v.Kind != yaml.ScalarNode {
			continue
		}
		switch d.Content[i].Value {
		case "kind":
			kind = expand(v.Value)
		case "name":
			name = expand(v.Value)
		case "project":
			stated = expand(v.Value)
		}
	}
	if name == "" {
		return ""
	}
	if _, ok := spec.DocKindOf(kind); !ok {
		kind = "workload"
	}
	return kind + " " + spec.FullName(cmp.Or(stated, spec.ProjectOf(name), project), spec.BareName(name))
}

// baseProject is the project of base's workloads when they share one:
// where the documents of the paths read after it go when they state none.
func baseProject(base *spec.Documents) string {
	if base == nil || len(base.Workloads) == 0 {
		return ""
	}
	p := cmp.Or(base.Workloads[0].Project, spec.ProjectOf(base.Workloads[0].Name))
	for _, w := range base.Workloads[1:] {
		if cmp.Or(w.Project, spec.ProjectOf(w.Name)) != p {
			return ""
		}
	}
	return p
}

// from is where a node was written.
type from struct {
	file string // as messages name it
	dir  string // absolute
}

// mergedDoc is one document of the result, and where it was first
// defined.
type mergedDoc struct {
	key  string
	doc  *yaml.Node
	at   *from
	line int
	// given is base's (ReadPathsOver) as it came: a workload no path
	// changes, or its other documents; nil once written as doc.
	given any
}

// workloadKey is docKey of a workload as given.
func workloadKey(w *spec.Workload) string {
	return "workload " + spec.FullName(cmp.Or(w.Project, spec.ProjectOf(w.Name)), spec.BareName(w.Name))
}

// nodeOf is v written as a document to merge into: its JSON, the wire
// form that parses back as it was, in block style, a field a line as a
// file's are, so that an error's line names one field.
func nodeOf(v any) (*yaml.Node, error) {
	n, err := BlockNode(v)
	if err != nil {
		return nil, err
	}
	if len(n.Content) != 1 {
		return nil, errors.New("not one document")
	}
	return n.Content[0], nil
}

// BlockNode is v's JSON as a YAML document in block style, its keys in
// the JSON's order, without the flow style and quotes JSON gave its
// nodes: an encoder quotes what needs it.
func BlockNode(v any) (*yaml.Node, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var n yaml.Node
	if err := yaml.Unmarshal(data, &n); err != nil {
		return nil, err
	}
	var block func(*yaml.Node)
	block = func(n *yaml.Node) {
		n.Style = 0
		for _, c := range n.Content {
			block(c)
		}
	}
	block(&n)
	return &n, nil
}

// merging holds what a merge knows of its nodes: the file each was
// written in.
type merging struct {
	c     Client
	where map[*yaml.Node]*from
}

func (c Client) merged(base *spec.Documents, baseName string, sets []pathSet, data [][][]byte) (*spec.Documents, error) {
	m := &merging{c: c, where: map[*yaml.Node]*from{}}
	var docs []*mergedDoc
	byKey := map[string]*mergedDoc{}
	bp := baseProject(base)
	if base != nil {
		wd, _ := filepath.Abs(".")
		at := &from{file: baseName, dir: wd}
		for _, w := range base.Workloads {
			md := &mergedDoc{key: workloadKey(w), at: at, given: w}
			byKey[md.key] = md
			docs = append(docs, md)
		}
		docs = append(docs, &mergedDoc{at: at, given: &spec.Documents{Docs: base.Docs}})
	}
	for i, s := range sets {
		o, err := c.options(s.dir)
		if err != nil {
			return nil, err
		}
		inSet := map[string]*mergedDoc{}
		for j, f := range s.files {
			at := &from{file: fileName(f), dir: o.Dir}
			raw, err := yamlDocs(data[i][j])
			if err != nil {
				return nil, fmt.Errorf("%s: %w", at.file, err)
			}
			for _, r := range raw {
				d, err := m.prepare(r, at, o)
				if err != nil {
					return nil, err
				}
				k := docKey(d, func(v string) string { return v }, bp)
				if k == "" {
					docs = append(docs, &mergedDoc{doc: d, at: at, line: d.Line})
					continue
				}
				if prev, ok := inSet[k]; ok {
					what, name, _ := strings.Cut(k, " ")
					if prev.at == at {
						return nil, fmt.Errorf("%s: line %d: name: %s %q is defined more than once", at.file, d.Line, what, name)
					}
					return nil, fmt.Errorf("%s: line %d: name: %s %q is defined in %s too (line %d): files of one -f are one set, where a name is defined once",
						at.file, d.Line, what, name, prev.at.file, prev.line)
				}
				inSet[k] = &mergedDoc{at: at, line: d.Line}
				if into, ok := byKey[k]; ok {
					if into.doc == nil {
						// base's workload, as written again to be merged.
						if into.doc, err = nodeOf(into.given); err != nil {
							return nil, fmt.Errorf("%s: workload %s: %w", into.at.file, into.given.(*spec.Workload).Name, err)
						}
						into.given = nil
					}
					into.doc = m.value(into.doc, d, "", strings.HasPrefix(k, "workload "))
					continue
				}
				md := &mergedDoc{key: k, doc: d, at: at, line: d.Line}
				byKey[k] = md
				docs = append(docs, md)
			}
		}
	}
	out := &spec.Documents{}
	for _, md := range docs {
		switch g := md.given.(type) {
		case *spec.Workload:
			out.Workloads = append(out.Workloads, g)
			continue
		case *spec.Documents:
			out.Add(g)
			continue
		}
		d, err := m.parse(md)
		if err != nil {
			return nil, err
		}
		out.Add(d)
	}
	return out, nil
}

// prepare is a document of file at as the merge takes it: a copy with its
// aliases followed, each string value given its variables, its relative
// paths (env_file, watch) resolved against its directory, every node's
// file known. A key twice in a mapping is an error here, where its line
// is still its file's.
func (m *merging) prepare(d *yaml.Node, at *from, o Options) (*yaml.Node, error) {
	budget := maxNodes
	out, err := m.copyNode(d, at, o, "", &budget, 0)
	if err != nil {
		return nil, err
	}
	if out.Kind != yaml.MappingNode {
		return out, nil
	}
	for i := 0; i+1 < len(out.Content); i += 2 {
		k, v := out.Content[i].Value, out.Content[i+1]
		switch k {
		case "env_file":
			absolute(v, at.dir)
		case "watch":
			if v.Kind != yaml.SequenceNode {
				continue
			}
			for _, e := range v.Content {
				if e.Kind != yaml.MappingNode {
					continue
				}
				for j := 0; j+1 < len(e.Content); j += 2 {
					if e.Content[j].Value == "path" {
						absolute(e.Content[j+1], at.dir)
					}
				}
			}
		}
	}
	return out, nil
}

// absolute makes a relative path of string n (or of each item of list n)
// absolute against dir.
func absolute(n *yaml.Node, dir string) {
	if n.Kind == yaml.SequenceNode {
		for _, e := range n.Content {
			absolute(e, dir)
		}
		return
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str" && n.Value != "" && !filepath.IsAbs(n.Value) {
		n.Value = filepath.Join(dir, n.Value)
	}
}

// maxNodes bounds alias expansion, as spec's reader does.
const maxNodes = 100_000

func (m *merging) copyNode(n *yaml.Node, at *from, o Options, path string, budget *int, depth int) (*yaml.Node, error) {
	if *budget--; *budget < 0 {
		return nil, fmt.Errorf("%s: line %d: YAML document too large (too many aliases?)", at.file, n.Line)
	}
	if depth > 64 {
		return nil, fmt.Errorf("%s: line %d: YAML nested too deeply", at.file, n.Line)
	}
	if n.Kind == yaml.AliasNode {
		return m.copyNode(n.Alias, at, o, path, budget, depth+1)
	}
	c := *n
	c.Anchor, c.Content = "", nil
	// Block style, so that each key and item is on a line of its own
	// when written again (see lines).
	c.Style &^= yaml.FlowStyle
	m.where[&c] = at
	switch n.Kind {
	case yaml.ScalarNode:
		if c.ShortTag() == "!!str" && strings.Contains(c.Value, "$") && path != "" {
			if err := m.expand(&c, at, o, path); err != nil {
				return nil, err
			}
		}
	case yaml.SequenceNode:
		for i, e := range n.Content {
			ce, err := m.copyNode(e, at, o, indexPath(path, i), budget, depth+1)
			if err != nil {
				return nil, err
			}
			c.Content = append(c.Content, ce)
		}
	case yaml.MappingNode:
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind == yaml.AliasNode {
				k = k.Alias
			}
			p := joinPath(path, k.Value)
			if k.Kind == yaml.ScalarNode && seen[k.Value] {
				return nil, fmt.Errorf("%s: line %d: %s: duplicate key", at.file, k.Line, p)
			}
			seen[k.Value] = true
			kc := *k
			kc.Anchor, kc.Style = "", kc.Style&^yaml.FlowStyle
			m.where[&kc] = at
			v, err := m.copyNode(n.Content[i+1], at, o, p, budget, depth+1)
			if err != nil {
				return nil, err
			}
			c.Content = append(c.Content, &kc, v)
		}
	}
	return &c, nil
}

// expand gives string n its variables, as Parse does: a value it changes
// is typed by what it became.
func (m *merging) expand(n *yaml.Node, at *from, o Options, path string) error {
	vars := o.Vars
	if vars == nil {
		vars = NoVars
	}
	out, err := Expand(n.Value, vars, func(variable string) error {
		if o.Warn == nil {
			return fmt.Errorf("variable %s is not set (give it a default: ${%s:-…})", variable, variable)
		}
		o.Warn(fmt.Sprintf("%s: line %d: %s: variable %s is not set: using an empty string", at.file, n.Line, path, variable))
		return nil
	})
	if err != nil {
		return fmt.Errorf("%s: line %d: %s: %w", at.file, n.Line, path, err)
	}
	if out != n.Value {
		n.Value, n.Tag, n.Style = out, tagOf(out), 0
	}
	return nil
}

// tagOf is the tag YAML gives a plain scalar written as s among those a
// value can become, as spec types an expanded value: a number, a boolean
// or a string (an empty value stays an empty string).
func tagOf(s string) string {
	switch s {
	case "true", "True", "TRUE", "false", "False", "FALSE":
		return "!!bool"
	case "":
		return "!!str"
	}
	if strings.Trim(s, "0123456789+-.eE") != "" || !strings.ContainsAny(s, "0123456789") {
		return "!!str"
	}
	if _, err := strconv.ParseFloat(s, 64); err != nil {
		return "!!str"
	}
	if _, err := strconv.ParseInt(s, 10, 64); err == nil {
		return "!!int"
	}
	return "!!float"
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func indexPath(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

// Tags an override file may give a value.
const (
	tagReset    = "!reset"
	tagOverride = "!override"
)

// listRule is how a workload's list is merged.
type listRule struct {
	// key is what an entry is merged by; nil: the later entries are
	// appended, one equal to an entry already there left out.
	key func(*yaml.Node) string
	// mergeEntry merges an entry into the earlier one of its key, key by
	// key, instead of taking its place.
	mergeEntry bool
}

// workloadLists are the lists of a workload that are merged; any other
// list is replaced.
var workloadLists = map[string]listRule{
	"env_file":           {},
	"profiles":           {},
	"uses":               {},
	"registry.tags":      {},
	"watch":              {},
	"after":              {key: scalarKey(func(s string) string { n, _ := spec.ParseAfter(s); return n })},
	"endpoints":          {key: fieldKey("name"), mergeEntry: true},
	"containerd.volumes": {key: scalarKey(volumeTarget)},
}

func scalarKey(f func(string) string) func(*yaml.Node) string {
	return func(n *yaml.Node) string {
		if n.Kind != yaml.ScalarNode {
			return ""
		}
		return f(n.Value)
	}
}

func fieldKey(field string) func(*yaml.Node) string {
	return func(n *yaml.Node) string {
		if n.Kind != yaml.MappingNode {
			return ""
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == field && n.Content[i+1].Kind == yaml.ScalarNode {
				return n.Content[i+1].Value
			}
		}
		return ""
	}
}

// volumeTarget is a containerd volume's target: SOURCE:TARGET[:MODE].
func volumeTarget(s string) string {
	parts := strings.Split(s, ":")
	if len(parts) < 2 {
		return s
	}
	return parts[1]
}

// value is over merged into base, at path of a document (a workload's
// when workload): base changed in place where it can be.
func (m *merging) value(base, over *yaml.Node, path string, workload bool) *yaml.Node {
	if over.Tag == tagOverride {
		over.Tag = ""
		return over
	}
	rule, listed := workloadLists[stripIndexes(path)]
	listed = listed && workload
	switch {
	case base.Kind == yaml.MappingNode && over.Kind == yaml.MappingNode:
		m.mapping(base, over, path, workload)
		return base
	case listed && base.Kind != yaml.MappingNode && over.Kind != yaml.MappingNode:
		return m.list(asList(base), asList(over), path, rule, workload)
	}
	return over
}

// mapping merges over's keys into base's.
func (m *merging) mapping(base, over *yaml.Node, path string, workload bool) {
	for i := 0; i+1 < len(over.Content); i += 2 {
		k, v := over.Content[i], over.Content[i+1]
		j := -1
		for b := 0; b+1 < len(base.Content); b += 2 {
			if base.Content[b].Value == k.Value {
				j = b
				break
			}
		}
		switch {
		case v.Tag == tagReset:
			if j >= 0 {
				base.Content = slices.Delete(base.Content, j, j+2)
			}
		case j < 0:
			base.Content = append(base.Content, k, v)
		case v.Kind == yaml.ScalarNode && v.ShortTag() == "!!null":
			// A null changes nothing, as leaving the key out.
		default:
			base.Content[j], base.Content[j+1] = k, m.value(base.Content[j+1], v, joinPath(path, k.Value), workload)
		}
	}
}

// list merges over's entries into base's by rule.
func (m *merging) list(base, over *yaml.Node, path string, rule listRule, workload bool) *yaml.Node {
	for _, e := range over.Content {
		at := -1
		for i, b := range base.Content {
			if rule.key == nil && equalNodes(b, e) {
				at = i
				break
			}
			if rule.key != nil {
				if k := rule.key(e); k != "" && rule.key(b) == k {
					at = i
					break
				}
			}
		}
		switch {
		case at < 0:
			base.Content = append(base.Content, e)
		case rule.key == nil:
		case rule.mergeEntry:
			base.Content[at] = m.value(base.Content[at], e, path+"[]", workload)
		default:
			base.Content[at] = e
		}
	}
	return base
}

// asList is n, or a list of n alone when it is a scalar (env_file: one.env).
func asList(n *yaml.Node) *yaml.Node {
	if n.Kind == yaml.SequenceNode {
		return n
	}
	return &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Line: n.Line, Column: n.Column, Content: []*yaml.Node{n}}
}

// stripIndexes is a field path without its list indexes: the path of
// its rule.
func stripIndexes(path string) string {
	var b strings.Builder
	in := false
	for _, r := range path {
		switch {
		case r == '[':
			in = true
		case r == ']':
			in = false
		case !in:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// equalNodes says whether two values are the same, wherever written.
func equalNodes(a, b *yaml.Node) bool {
	if a.Kind != b.Kind || len(a.Content) != len(b.Content) {
		return false
	}
	if a.Kind == yaml.ScalarNode {
		return a.Value == b.Value && a.ShortTag() == b.ShortTag()
	}
	for i := range a.Content {
		if !equalNodes(a.Content[i], b.Content[i]) {
			return false
		}
	}
	return true
}

// settle does what the tags left in n say: a value tagged !reset goes
// with its key (nothing to merge it into was there), !override is
// dropped (nothing to replace).
func settle(n *yaml.Node) {
	if n.Tag == tagOverride {
		n.Tag = ""
	}
	if n.Kind == yaml.MappingNode {
		out := n.Content[:0]
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i+1].Tag == tagReset {
				continue
			}
			out = append(out, n.Content[i], n.Content[i+1])
		}
		n.Content = out
	}
	for _, c := range n.Content {
		settle(c)
	}
}

// parse parses a merged document as strictly as a file's: written again
// as YAML, read by spec's parser, an error pointed back at the file and
// line of what it concerns.
func (m *merging) parse(md *mergedDoc) (*spec.Documents, error) {
	settle(md.doc)
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(md.doc); err != nil {
		return nil, fmt.Errorf("%s: line %d: %w", md.at.file, md.line, err)
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	// A host workload's relative workdir is the directory of the file
	// that gives it, its default the first file's.
	dir := md.at.dir
	if md.doc.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(md.doc.Content); i += 2 {
			if md.doc.Content[i].Value == "workdir" {
				if at := m.where[md.doc.Content[i+1]]; at != nil {
					dir = at.dir
				}
			}
		}
	}
	d, err := spec.ParseAllIn(b.Bytes(), dir, nil)
	if err != nil {
		return nil, m.pointBack(err, b.Bytes(), md)
	}
	for _, w := range d.Workloads {
		if err := withEnvFiles(w, ReadEnvFile); err != nil {
			return nil, fmt.Errorf("%s: workload %s: %w", md.at.file, w.Name, err)
		}
	}
	return d, nil
}

// pointBack is err, which says lines of the document as written again,
// saying the file and line each came from; each of several errors its own.
func (m *merging) pointBack(err error, written []byte, md *mergedDoc) error {
	var again *yaml.Node
	var n yaml.Node
	if yaml.Unmarshal(written, &n) == nil && len(n.Content) == 1 {
		again = n.Content[0]
	}
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		var errs []error
		for _, e := range joined.Unwrap() {
			errs = append(errs, m.pointOne(e, again, md))
		}
		return errors.Join(errs...)
	}
	return m.pointOne(err, again, md)
}

func (m *merging) pointOne(err error, again *yaml.Node, md *mergedDoc) error {
	msg := err.Error()
	rest, ok := strings.CutPrefix(msg, "line ")
	num, rest, ok2 := strings.Cut(rest, ": ")
	line, err2 := strconv.Atoi(num)
	if !ok || !ok2 || err2 != nil {
		return &pointed{msg: fmt.Sprintf("%s: line %d: %s", md.at.file, md.line, msg), err: err}
	}
	at, orig := md.at, md.line
	if again != nil {
		if f, l, ok := m.origin(again, md.doc, line); ok {
			at, orig = f, l
		}
	}
	return &pointed{msg: fmt.Sprintf("%s: line %d: %s", at.file, orig, rest), err: err}
}

// origin finds the first node of written (the document as written again)
// on line, and says where its twin in doc was written.
func (m *merging) origin(written, doc *yaml.Node, line int) (*from, int, bool) {
	if written.Line == line {
		if at := m.where[doc]; at != nil {
			return at, doc.Line, true
		}
	}
	if len(written.Content) != len(doc.Content) {
		return nil, 0, false
	}
	for i := range written.Content {
		if f, l, ok := m.origin(written.Content[i], doc.Content[i], line); ok {
			return f, l, true
		}
	}
	return nil, 0, false
}

// pointed is a parser's error said of the file and line it concerns,
// still the parser's error underneath (a *spec.FieldError).
type pointed struct {
	msg string
	err error
}

func (e *pointed) Error() string { return e.msg }
func (e *pointed) Unwrap() error { return e.err }
