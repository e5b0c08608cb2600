// Package daemon is flyd's daemon as a package (Run): what the daemon
// program wires together (trust of its paths, its lock, the records and
// the event bus, the embedded registry and the registrar, the runtimes,
// the network plane, the supervisor, the documents and the projects over
// it, the workloads directory and the log holder), started in that order
// and stopped in the reverse; and the adapter that serves the supervisor,
// the documents and the projects through the API (Backend). The supervisor speaks its own types and never imports the
// wire; this package is where the two meet. It does not parse flags: the
// daemon program does, and hands it what they say.
package daemon
