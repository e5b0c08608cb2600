package registry

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
)

// MaxBodyBytes caps request bodies: an instance is a few hundred bytes.
const MaxBodyBytes = 64 << 10

// The routes of the contract (R7).
const (
	PathServices   = "/api/v1/services"
	PathRegister   = "/api/v1/services/register"
	PathHeartbeat  = "/api/v1/services/heartbeat"
	PathDeregister = "/api/v1/services/deregister"
	PathExport     = "/api/v1/services/export"
)

// ExtensionsHeader is the response header with which this registry
// announces the extensions it takes beyond the contract, on every answer
// to a request that carried the key: a comma-separated list of
// ExtBatchHeartbeat, ExtBatchRegister and ExtWatch. A client uses an
// extension only after a registry announced it; any other registry is
// spoken to in the contract alone.
const ExtensionsHeader = "Flyd-Registry-Extensions"

// The extensions ExtensionsHeader names.
const (
	ExtBatchHeartbeat = "batch-heartbeat" // {"ids": [...]} on /heartbeat
	ExtBatchRegister  = "batch-register"  // {"instances": [...]} on /register
	ExtWatch          = "watch"           // ?watch=REV on /api/v1/services
)

// extensions is the value of ExtensionsHeader.
const extensions = ExtBatchHeartbeat + ", " + ExtBatchRegister + ", " + ExtWatch

// errorBody is the JSON form of every error answer.
type errorBody struct {
	Error string `json:"error"`
}

type idBody struct {
	ID string `json:"id"`
}

// MaxBatch bounds the ids of one batch heartbeat.
const MaxBatch = 500

// heartbeatBody is a heartbeat: the contract's {"id"}, or the batch
// extension {"ids": [...]}, one of them.
type heartbeatBody struct {
	ID  string   `json:"id"`
	IDs []string `json:"ids"`
}

// beatResult is the answer for one id of a batch heartbeat: the status a
// heartbeat of that id alone would have had, and its body's fields.
type beatResult struct {
	ID        string     `json:"id"`
	Status    int        `json:"status"`
	UpdatedAt *time.Time `json:"updated_at,omitempty"`
	Error     string     `json:"error,omitempty"`
}

func (s *Server) routes() http.Handler {
	m := http.NewServeMux()
	m.Handle(PathRegister, only(http.MethodPost, s.register))
	m.Handle(PathHeartbeat, only(http.MethodPost, s.heartbeat))
	m.Handle(PathDeregister, only(http.MethodPost, s.deregister))
	m.Handle(PathServices, only(http.MethodGet, s.services))
	m.Handle(PathExport, only(http.MethodGet, s.export))
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "no route "+r.Method+" "+r.URL.Path)
	})
	return s.authenticated(m)
}

// authenticated refuses every request without the key, unknown routes
// included, so that an unauthenticated caller learns nothing. Hashing both
// sides makes the comparison constant-time in the length too.
func (s *Server) authenticated(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		given := r.Header.Get("X-API-Key")
		if given == "" {
			writeError(w, http.StatusUnauthorized, "missing X-API-Key header")
			return
		}
		h := sha256.Sum256([]byte(given))
		if subtle.ConstantTimeCompare(h[:], s.keyHash[:]) != 1 {
			writeError(w, http.StatusUnauthorized, "invalid API key")
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, MaxBodyBytes)
		w.Header().Set(ExtensionsHeader, extensions)
		next.ServeHTTP(w, r)
	})
}

// only answers other methods with a JSON 405 (the mux's own is plain text).
func only(method string, h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != method {
			w.Header().Set("Allow", method)
			writeError(w, http.StatusMethodNotAllowed, "use "+method+" on "+r.URL.Path)
			return
		}
		h(w, r)
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, errorBody{Error: msg})
}

// decode reads exactly one JSON object with only known fields into v, and
// answers the request itself when it cannot.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil && dec.Decode(&struct{}{}) != io.EOF {
		err = errors.New("trailing data after the JSON object")
	}
	var mbe *http.MaxBytesError
	switch {
	case err == nil:
		return true
	case errors.As(err, &mbe):
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body over %d bytes", mbe.Limit))
	case errors.Is(err, io.EOF):
		writeError(w, http.StatusBadRequest, "empty request body: a JSON object is required")
	default:
		writeError(w, http.StatusBadRequest, "malformed request body: "+err.Error())
	}
	return false
}

// registerBody is a register: the contract's one instance, or the batch
// extension {"instances": [...]}, one of them. A registry that does not
// know the extension refuses the unknown field with a 400, which tells a
// client to register one by one.
type registerBody struct {
	registration
	Instances []registration `json:"instances"`
}

// registerResult is the answer for one instance of a batch register: the
// status a register of that instance alone would have had, and its body's
// fields.
type registerResult struct {
	ID      string `json:"id"`
	Status  int    `json:"status"`
	Created bool   `json:"created"`
	Error   string `json:"error,omitempty"`
}

func (s *Server) register(w http.ResponseWriter, r *http.Request) {
	var b registerBody
	if !decode(w, r, &b) {
		return
	}
	if b.Instances != nil {
		if !reflect.ValueOf(b.registration).IsZero() {
			writeError(w, http.StatusBadRequest, "give one instance or instances, not both")
			return
		}
		s.registerMany(w, r, b.Instances)
		return
	}
	in, err := b.registration.instance(s.cfg.DefaultTTL)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	in, created, err := s.store.Upsert(r.Context(), in, s.now())
	if err != nil {
		s.storeError(w, "register", in.ID, err)
		return
	}
	s.changed()
	if created {
		s.log.Info("instance registered", zap.String("id", in.ID), zap.String("name", in.Name),
			zap.String("address", in.Address), zap.Int("port", in.Port))
	} else {
		s.log.Debug("instance refreshed", zap.String("id", in.ID))
	}
	writeJSON(w, http.StatusOK, struct {
		ID      string `json:"id"`
		Created bool   `json:"created"`
	}{in.ID, created})
}

// registerMany answers a batch register 200 with a result per instance,
// in the order given, each validated and stored as a register of it alone
// would be; the request as a whole fails only when it is malformed or the
// store cannot answer at all.
func (s *Server) registerMany(w http.ResponseWriter, r *http.Request, regs []registration) {
	switch {
	case len(regs) == 0:
		writeError(w, http.StatusBadRequest, "instances is empty")
		return
	case len(regs) > MaxBatch:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("%d instances: at most %d in one register", len(regs), MaxBatch))
		return
	}
	res := make([]registerResult, len(regs))
	var ins []Instance
	var at []int // index in regs of each of ins
	for i := range regs {
		in, err := regs[i].instance(s.cfg.DefaultTTL)
		if err != nil {
			res[i] = registerResult{ID: strings.TrimSpace(regs[i].ID), Status: http.StatusBadRequest, Error: err.Error()}
			continue
		}
		ins, at = append(ins, in), append(at, i)
	}
	created := 0
	if len(ins) > 0 {
		out, made, errs := s.store.UpsertMany(r.Context(), ins, s.now())
		if allUnavailable(errs) {
			s.storeError(w, "register", "", errs[0])
			return
		}
		for k, i := range at {
			res[i] = registerResult{ID: ins[k].ID, Status: http.StatusOK, Created: made[k]}
			if err := errs[k]; err != nil {
				res[i].Status, res[i].Error = resultStatus(err), "register: "+err.Error()
				continue
			}
			res[i].ID = out[k].ID
			if made[k] {
				created++
			}
		}
		s.changed()
	}
	s.log.Info("instances registered in a batch", zap.Int("instances", len(regs)), zap.Int("created", created))
	writeJSON(w, http.StatusOK, struct {
		Results []registerResult `json:"results"`
	}{res})
}

// resultStatus is the status of one item of a batch that the store
// failed, as storeError would answer it alone.
func resultStatus(err error) int {
	switch {
	case errors.Is(err, ErrNotRegistered):
		return http.StatusGone
	case errors.Is(err, ErrUnavailable):
		return http.StatusServiceUnavailable
	case errors.Is(err, ErrConflict):
		return http.StatusConflict
	default:
		return http.StatusInternalServerError
	}
}

// readID reads a {"id"} body.
func readID(w http.ResponseWriter, r *http.Request) (string, bool) {
	var b idBody
	if !decode(w, r, &b) {
		return "", false
	}
	if strings.TrimSpace(b.ID) == "" {
		writeError(w, http.StatusBadRequest, "id is required")
		return "", false
	}
	return b.ID, true
}

func (s *Server) heartbeat(w http.ResponseWriter, r *http.Request) {
	var b heartbeatBody
	if !decode(w, r, &b) {
		return
	}
	switch {
	case b.IDs != nil && b.ID != "":
		writeError(w, http.StatusBadRequest, "give id or ids, not both")
		return
	case b.IDs != nil:
		s.heartbeatMany(w, r, b.IDs)
		return
	case strings.TrimSpace(b.ID) == "":
		writeError(w, http.StatusBadRequest, "id is required")
		return
	}
	id := b.ID
	in, err := s.store.Heartbeat(r.Context(), id, s.now())
	if errors.Is(err, ErrNotRegistered) {
		writeError(w, http.StatusGone, goneMessage(id))
		return
	}
	if err != nil {
		s.storeError(w, "heartbeat", id, err)
		return
	}
	s.leasesDirty.Store(true)
	writeJSON(w, http.StatusOK, struct {
		ID        string    `json:"id"`
		UpdatedAt time.Time `json:"updated_at"`
	}{in.ID, in.UpdatedAt})
}

func goneMessage(id string) string {
	return fmt.Sprintf("instance %q is unknown or its lease expired: register again", id)
}

// heartbeatMany answers a batch heartbeat 200 with a result per id, in
// the order given; the request as a whole fails only when it is malformed
// or the store cannot answer at all.
func (s *Server) heartbeatMany(w http.ResponseWriter, r *http.Request, ids []string) {
	switch {
	case len(ids) == 0:
		writeError(w, http.StatusBadRequest, "ids is empty")
		return
	case len(ids) > MaxBatch:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("%d ids: at most %d in one heartbeat", len(ids), MaxBatch))
		return
	}
	for i, id := range ids {
		if strings.TrimSpace(id) == "" {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("ids[%d] is empty", i))
			return
		}
	}
	ins, errs := s.store.HeartbeatMany(r.Context(), ids, s.now())
	if allUnavailable(errs) {
		s.storeError(w, "heartbeat", "", errs[0])
		return
	}
	res := make([]beatResult, len(ids))
	for i, id := range ids {
		res[i] = beatResult{ID: id, Status: http.StatusOK}
		switch err := errs[i]; {
		case err == nil:
			at := ins[i].UpdatedAt
			res[i].UpdatedAt = &at
		case errors.Is(err, ErrNotRegistered):
			res[i].Status, res[i].Error = http.StatusGone, goneMessage(id)
		default:
			res[i].Status, res[i].Error = resultStatus(err), err.Error()
		}
	}
	s.leasesDirty.Store(true)
	writeJSON(w, http.StatusOK, struct {
		Results []beatResult `json:"results"`
	}{res})
}

// allUnavailable: the store answered none of the batch, which is then a
// 503 like any request the store cannot answer, so clients move to another
// replica.
func allUnavailable(errs []error) bool {
	for _, err := range errs {
		if !errors.Is(err, ErrUnavailable) {
			return false
		}
	}
	return true
}

func (s *Server) deregister(w http.ResponseWriter, r *http.Request) {
	id, ok := readID(w, r)
	if !ok {
		return
	}
	in, err := s.store.Remove(r.Context(), id, s.now())
	if errors.Is(err, ErrNotRegistered) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("instance %q is not registered", id))
		return
	}
	if err != nil {
		s.storeError(w, "deregister", id, err)
		return
	}
	s.changed()
	s.log.Info("instance deregistered", zap.String("id", in.ID), zap.String("name", in.Name))
	writeJSON(w, http.StatusOK, idBody{ID: in.ID})
}

// boolParam reads a boolean query parameter ("1", "true", "0", ...).
func boolParam(w http.ResponseWriter, r *http.Request, name string) (on, ok bool) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return false, true
	}
	on, err := strconv.ParseBool(v)
	if err != nil {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("query parameter %s=%q is not a boolean", name, v))
		return false, false
	}
	return on, true
}

// services lists the names of the live services, or with ?detail=1 their
// instances; ?healthy_only=1 keeps the healthy instances only (R6).
func (s *Server) services(w http.ResponseWriter, r *http.Request) {
	if q := r.URL.Query(); q.Has("watch") {
		s.watch(w, r, q.Get("watch"))
		return
	}
	detail, ok := boolParam(w, r, "detail")
	if !ok {
		return
	}
	healthy, ok := boolParam(w, r, "healthy_only")
	if !ok {
		return
	}
	ins, ok := s.list(w, r, healthy)
	if !ok {
		return
	}
	if detail {
		writeJSON(w, http.StatusOK, struct {
			Instances []Instance `json:"instances"`
		}{ins})
		return
	}
	names := make([]string, 0, len(ins))
	for _, in := range ins {
		names = append(names, in.Name)
	}
	writeJSON(w, http.StatusOK, struct {
		Services []string `json:"services"`
	}{slices.Compact(names)}) // sorted by name already
}

func (s *Server) export(w http.ResponseWriter, r *http.Request) {
	healthy, ok := boolParam(w, r, "healthy_only")
	if !ok {
		return
	}
	ins, ok := s.list(w, r, healthy)
	if !ok {
		return
	}
	w.Header().Set("Content-Type", "application/toml; charset=utf-8")
	w.Header().Set("Content-Disposition", `inline; filename="koder-service-ports.toml"`)
	w.Header().Set("Cache-Control", "no-store")
	_, _ = io.WriteString(w, RenderTOML(ins))
}

// list reads the live instances, sorted, and answers the request itself
// when the store cannot.
func (s *Server) list(w http.ResponseWriter, r *http.Request, healthy bool) ([]Instance, bool) {
	ins, err := s.store.List(r.Context(), s.now(), healthy)
	if err != nil {
		s.storeError(w, "list", "", err)
		return nil, false
	}
	sortInstances(ins)
	return ins, true
}

// storeError answers a store failure other than ErrNotRegistered, which
// means something different to each route. This is the one place store
// errors become statuses.
func (s *Server) storeError(w http.ResponseWriter, op, id string, err error) {
	switch {
	case errors.Is(err, ErrUnavailable):
		s.log.Warn("registry store unavailable", zap.String("op", op), zap.String("id", id), zap.Error(err))
		// Registrants retry 5xx with their own backoff; this is a hint.
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, op+": "+err.Error())
	case errors.Is(err, ErrConflict):
		writeError(w, http.StatusConflict, op+": "+err.Error())
	default:
		s.log.Error("registry store failed", zap.String("op", op), zap.String("id", id), zap.Error(err))
		writeError(w, http.StatusInternalServerError, op+": "+err.Error())
	}
}
