package schema

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
)

// typeDocs are the doc comments of package spec's struct types: type
// name → field name ("" for the type's own) → the comment as one line.
type typeDocs map[string]map[string]string

func (d typeDocs) typ(name string) string          { return d[name][""] }
func (d typeDocs) field(name, field string) string { return d[name][field] }

// readDocs reads the doc comments of the Go files in dir, tests left out.
func readDocs(dir string) (typeDocs, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	docs := typeDocs{}
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, s := range gd.Specs {
				ts := s.(*ast.TypeSpec)
				st, ok := ts.Type.(*ast.StructType)
				if !ok {
					continue
				}
				m := map[string]string{}
				doc := ts.Doc
				if doc == nil && len(gd.Specs) == 1 {
					doc = gd.Doc
				}
				m[""] = oneLine(doc)
				for _, f := range st.Fields.List {
					text := oneLine(f.Doc)
					if c := oneLine(f.Comment); c != "" {
						text = strings.TrimSpace(text + " " + c)
					}
					for _, n := range f.Names {
						m[n.Name] = text
					}
				}
				docs[ts.Name.Name] = m
			}
		}
	}
	return docs, nil
}

// oneLine is a comment's text as one line.
func oneLine(g *ast.CommentGroup) string {
	if g == nil {
		return ""
	}
	return strings.Join(strings.Fields(g.Text()), " ")
}
