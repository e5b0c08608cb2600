// Package specload reads spec files the way their readers share: `flyd
// apply` (and the commands that will apply files the same way) and the
// daemon's workloads directory.
//
// It gives the values of the documents their variables, as docker compose
// interpolates (Expand): ${VAR}, ${VAR:-default}, ${VAR-default},
// ${VAR:?message}, ${VAR?message}, ${VAR:+other}, ${VAR+other}, and $$ for
// a '$'. Values are interpolated once parsed (spec.ParseAllExpanded), never
// the raw text, so a value holding a quote or a newline stays one value.
// The daemon's own forms are left as written for it: ${endpoint:…} (any
// ${NAME:…} whose ':' is not one of the operators above) and
// ${PORT_NAME} / ${ADDR_NAME}. A '$' before anything else stays a '$', so
// that `sh -c` commands keep their $VARS for the workload's shell.
//
// It reads env files with github.com/joho/godotenv (ParseEnv): the .env
// beside the spec files and --env-file for the variables, and a workload's
// env_file, whose variables go into its env, env winning. It selects
// workloads by profile (Select). It reads several -f as one (ReadPaths):
// a later file's document of an earlier one's kind and name changes the
// fields it sets, as docker compose merges an override file (merge.go).
//
// It reports variables by name and files by path, never a value: a
// variable may hold a secret.
package specload
