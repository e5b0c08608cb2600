package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/flyd-dev/flyd/api"
)

func writeError(w http.ResponseWriter, err error) {
	e := toError(err)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.Status)
	_ = json.NewEncoder(w).Encode(api.ErrorBody{Error: e})
}

// toError is api.ErrorOf with what only a server meets: a request body
// over its bound.
func toError(err error) *api.Error {
	var bse *bodyShareError
	if errors.As(err, &bse) {
		return bse.apiError()
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return &api.Error{Status: http.StatusRequestEntityTooLarge, Code: "too_large",
			Message: fmt.Sprintf("request body over %d bytes", mbe.Limit)}
	}
	return api.ErrorOf(err)
}
