// Package schema is the JSON Schema of flyd's spec files: workloads and
// every kind of document beside them (spec.DocKinds), which an editor
// validates a file against as it is written (yaml-language-server, VS
// Code, JetBrains). flyd.schema.json is generated from package spec's
// types by Generate (go generate ./schema), and a test fails when the file
// is not what Generate makes.
//
// The schema describes what spec's strict decoder accepts, type by type:
// a struct is a mapping of its json keys and no other, a Duration a
// string with a unit ("10s"), a Port "hashed", "ephemeral" or a number,
// a Size bytes or "256Mi", a StringList a string or a list; a string
// field takes a number or a boolean too, as written (`cpu_max: 0.5`), and
// an explicit null is a field left out. Beyond the types it says what
// validation refuses where an enum, a pattern, a bound or a required key
// can say it (a name's DNS label, an `after` entry's condition, a
// section of another runtime's kind), and leaves the rest (exactly one
// health check, which endpoint a check names) to flyd. Any scalar may be
// a ${VAR} for flyd apply to interpolate. So it never refuses a document
// flyd accepts; it refuses most of what flyd refuses.
//
// The reflection is written here rather than with a schema library: the
// decoder's rules (a number for a string, null for absent, scalar types
// with their own syntax, `kind` choosing the document's type, the
// runtime table's sections) are spec's own, and a library's reflection
// would need each overridden.
package schema

//go:generate go run ./gen -o flyd.schema.json
