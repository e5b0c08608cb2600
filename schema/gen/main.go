// Command gen writes flyd's JSON Schema (package schema) to a file: go
// generate ./schema runs it in the package's directory.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/flyd-dev/flyd/schema"
)

func main() {
	out := flag.String("o", schema.File, "the file to write")
	specDir := flag.String("spec", "../spec", "package spec's directory, whose doc comments are the descriptions")
	flag.Parse()
	b, err := schema.Generate(*specDir)
	if err == nil {
		err = os.WriteFile(*out, b, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}
