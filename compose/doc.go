// Package compose reads compose files (the Compose Specification) with
// compose's own loader, github.com/compose-spec/compose-go/v2, and maps
// the project onto flyd's documents: one compose project is one flyd
// project, a service a workload (a group with deploy.replicas), the
// networks its services are in the project's networks. A service's image
// makes it a containerd workload; its x-flyd extension makes it a native
// or nix workload, or adds flyd's own fields, decoded by flyd's parser.
// What flyd cannot honour is refused, and what it reads without effect is
// warned of, each naming the file, the service and the field.
package compose
