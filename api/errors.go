package api

import (
	"errors"
	"fmt"

	"github.com/flyd-dev/flyd/authz"
	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/spec"
)

// ErrorBody is the wire form of every error.
type ErrorBody struct {
	Error *Error `json:"error"`
}

// Error is an API error: a stable code, a message for people, and the spec
// field it concerns when there is one. It unwraps to the errdefs kind of its
// code, so errors.Is works the same on both sides of the socket.
type Error struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
}

func (e *Error) Error() string { return e.Message + " (" + e.Code + ")" }

func (e *Error) Unwrap() error {
	for _, c := range codes {
		if c.code == e.Code {
			return c.kind
		}
	}
	return nil
}

// Forbidden refuses a field of a spec to the peer that sent it.
func Forbidden(field, format string, args ...any) *Error {
	return &Error{Status: 403, Code: "forbidden", Field: field,
		Message: field + ": " + fmt.Sprintf(format, args...)}
}

// codes is the one table from error kinds to wire codes and the HTTP
// statuses they are answered with (numbers: the client links no net/http).
var codes = []struct {
	kind   error
	code   string
	status int
}{
	{errdefs.ErrInvalid, "invalid_spec", 400},
	{errdefs.ErrNotFound, "not_found", 404},
	{errdefs.ErrConflict, "conflict", 409},
	{errdefs.ErrForbidden, "forbidden", 403},
	{errdefs.ErrPortInUse, "port_in_use", 409},
	{errdefs.ErrArgumentTooLong, "argument_too_long", 422},
	{errdefs.ErrEnvironmentTooLarge, "environment_too_large", 422},
	{errdefs.ErrRuntimeUnavailable, "runtime_unavailable", 503},
	{errdefs.ErrNotImplemented, "not_implemented", 501},
	{errdefs.ErrUnavailable, "unavailable", 503},
}

// ErrorOf maps any error to its wire form. Errors of unknown kind are
// internal; their message is still the wrapped message, which packages keep
// free of secrets and values.
func ErrorOf(err error) *Error {
	var ae *Error
	if errors.As(err, &ae) {
		return ae
	}
	// Before the kinds: a refusal wrapped in another kind (a project's
	// document found invalid) stays a refusal, naming its field.
	var rf *authz.Refusal
	if errors.As(err, &rf) {
		return Forbidden(rf.Field, "%s", rf.Msg)
	}
	var fe *spec.FieldError
	if errors.As(err, &fe) {
		return &Error{Status: 400, Code: "invalid_spec", Message: fe.Error(), Field: fe.Field}
	}
	for _, c := range codes {
		if errors.Is(err, c.kind) {
			return &Error{Status: c.status, Code: c.code, Message: err.Error()}
		}
	}
	return &Error{Status: 500, Code: "internal", Message: err.Error()}
}
