package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/api"
	"github.com/flyd-dev/flyd/authz"
	"github.com/flyd-dev/flyd/errdefs"
)

// streamSink writes records to a response, buffered, and sends them at
// each Flush or when the buffer is full; a reader that stops reading
// fails the write after writeTimeout.
type streamSink struct {
	bw      *bufio.Writer
	rc      *http.ResponseController
	records bool
}

func (s *streamSink) Record(r api.LogRecord) error {
	if s.records {
		if _, err := fmt.Fprintf(s.bw, "%d %d %d\n", r.Pos, r.Time.UnixNano(), len(r.Data)); err != nil {
			return err
		}
	}
	_, err := s.bw.Write(r.Data)
	return err
}

func (s *streamSink) Flush() {
	if s.bw.Buffered() == 0 {
		_ = s.rc.Flush() // the headers, before any record
		return
	}
	_ = s.bw.Flush() // through flushWriter, which bounds each write
}

func parseLogQuery(v url.Values) (q api.LogQuery, records bool, err error) {
	q.Tail = -1
	if s := v.Get("tail"); s != "" {
		if q.Tail, err = strconv.Atoi(s); err != nil {
			return q, false, fmt.Errorf("%w: tail: not a number", errdefs.ErrInvalid)
		}
	}
	if s := v.Get("since"); s != "" {
		if q.Since, err = time.Parse(time.RFC3339Nano, s); err != nil {
			return q, false, fmt.Errorf("%w: since: not an RFC 3339 time", errdefs.ErrInvalid)
		}
	}
	if s := v.Get("from"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			return q, false, fmt.Errorf("%w: from: not a position", errdefs.ErrInvalid)
		}
		q.From = &n
	}
	q.Follow = v.Get("follow") == "1" || v.Get("follow") == "true"
	switch f := v.Get("format"); f {
	case "", "text":
	case "records":
		records = true
	default:
		return q, false, fmt.Errorf("%w: format: %q is neither text nor records", errdefs.ErrInvalid, f)
	}
	return q, records, nil
}

func (s *Server) logs(w http.ResponseWriter, r *http.Request) {
	q, records, err := parseLogQuery(r.URL.Query())
	if err != nil {
		writeError(w, err)
		return
	}
	name := r.PathValue("name")
	// Answer not_found, and forbidden, as JSON before the stream starts:
	// a confined caller reads the logs of its own workloads alone.
	wl, err := s.backend.Get(r.Context(), name)
	if err != nil {
		writeError(w, err)
		return
	}
	if err := authz.Decide(s.callerOf(r), authz.Read, workloadDoc(name, *wl)); err != nil {
		writeError(w, err)
		return
	}
	if !s.openStream(w, r) {
		return
	}
	defer s.closeStream(r)
	if records {
		w.Header().Set("Content-Type", "application/x-flyd-log-records")
	} else {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	}
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	out := &streamSink{bw: bufio.NewWriterSize(flushWriter{w: w, rc: rc}, 64<<10), rc: rc, records: records}
	out.Flush()
	err = s.backend.Logs(r.Context(), name, q, out)
	out.Flush()
	if err != nil && !errors.Is(err, context.Canceled) {
		s.log.Debug("log stream ended", zap.String("workload", name), zap.Error(err))
	}
}
