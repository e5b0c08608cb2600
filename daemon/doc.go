// Package daemon is flyd's daemon as a package: what the daemon program
// wires together (the supervisor, the runtimes, the network plane, the
// registry) and the adapter that serves the supervisor through the API
// (Backend). The supervisor speaks its own types and never imports the
// wire; this package is where the two meet. It does not parse flags: the
// daemon program does, and hands it what they say.
package daemon
