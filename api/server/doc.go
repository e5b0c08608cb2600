// Package server is the daemon's side of the wire: the HTTP server that
// serves a Backend over the Unix socket, and who comes in through it as
// whom: the socket's peers and their admission (peer.go, gate.go),
// --peer-users' spec rules (peerusers.go), a caller confined or not
// (caller.go), and the bounds on connections, streams and applies a peer
// may hold (quota.go). The types it speaks are package api's; the client
// that speaks to it is api.Client, which implements Backend too, so one
// interface is served in-process and over the socket.
//
// It holds no supervision logic; daemon.Backend turns its requests into
// the supervisor's commands.
package server
