package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

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
	return &Error{Status: http.StatusForbidden, Code: "forbidden", Field: field,
		Message: field + ": " + fmt.Sprintf(format, args...)}
}

// codes is the one table from error kinds to wire codes.
var codes = []struct {
	kind   error
	code   string
	status int
}{
	{errdefs.ErrInvalid, "invalid_spec", http.StatusBadRequest},
	{errdefs.ErrNotFound, "not_found", http.StatusNotFound},
	{errdefs.ErrConflict, "conflict", http.StatusConflict},
	{errdefs.ErrForbidden, "forbidden", http.StatusForbidden},
	{errdefs.ErrPortInUse, "port_in_use", http.StatusConflict},
	{errdefs.ErrArgumentTooLong, "argument_too_long", http.StatusUnprocessableEntity},
	{errdefs.ErrEnvironmentTooLarge, "environment_too_large", http.StatusUnprocessableEntity},
	{errdefs.ErrRuntimeUnavailable, "runtime_unavailable", http.StatusServiceUnavailable},
	{errdefs.ErrNotImplemented, "not_implemented", http.StatusNotImplemented},
	{errdefs.ErrUnavailable, "unavailable", http.StatusServiceUnavailable},
}

// toError maps any error to its wire form. Errors of unknown kind are
// internal; their message is still the wrapped message, which packages keep
// free of secrets and values.
func toError(err error) *Error {
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
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return &Error{Status: http.StatusRequestEntityTooLarge, Code: "too_large",
			Message: fmt.Sprintf("request body over %d bytes", mbe.Limit)}
	}
	var fe *spec.FieldError
	if errors.As(err, &fe) {
		return &Error{Status: http.StatusBadRequest, Code: "invalid_spec", Message: fe.Error(), Field: fe.Field}
	}
	for _, c := range codes {
		if errors.Is(err, c.kind) {
			return &Error{Status: c.status, Code: c.code, Message: err.Error()}
		}
	}
	return &Error{Status: http.StatusInternalServerError, Code: "internal", Message: err.Error()}
}

func writeError(w http.ResponseWriter, err error) {
	e := toError(err)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.Status)
	_ = json.NewEncoder(w).Encode(ErrorBody{Error: e})
}
