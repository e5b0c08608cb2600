// Package errdefs holds the kinds of error flyd's packages return, as values
// checked with errors.Is. The API maps each kind to a stable wire code in one
// table (api/errors.go) and the Go client maps codes back, so a caller on
// either side of the socket tests errors the same way.
//
// It is not a place for messages: a package wraps a kind with %w and says,
// in the user's words, what was refused and why.
package errdefs

import "errors"

var (
	ErrInvalid             = errors.New("invalid")
	ErrNotFound            = errors.New("not found")
	ErrConflict            = errors.New("conflict")
	ErrForbidden           = errors.New("forbidden")
	ErrPortInUse           = errors.New("port in use")
	ErrArgumentTooLong     = errors.New("argument too long")
	ErrEnvironmentTooLarge = errors.New("environment too large")
	ErrRuntimeUnavailable  = errors.New("runtime unavailable")
	ErrNotImplemented      = errors.New("not implemented")
	ErrUnavailable         = errors.New("unavailable")
	ErrInternal            = errors.New("internal error")
)
