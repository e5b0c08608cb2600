package events

import (
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"
)

// appendRecord appends r as json.Marshal encodes it: the history's line,
// written for every event without reflection. TestRecordEncoding holds
// the two to the same bytes. What json.Marshal refuses (a time past the
// year 9999) it refuses too, with b as it was.
func appendRecord(b []byte, r eventRecord) ([]byte, error) {
	if err := encodable(r.Time); err != nil {
		return b, err
	}
	if r.Exit != nil {
		if err := encodable(r.Exit.At); err != nil {
			return b, err
		}
	}
	b = append(b, `{"seq":`...)
	b = strconv.AppendUint(b, r.Seq, 10)
	b = append(b, `,"time":`...)
	b = appendTime(b, r.Time)
	b = append(b, `,"type":`...)
	b = appendString(b, r.Type)
	if r.Workload != "" {
		b = append(b, `,"workload":`...)
		b = appendString(b, r.Workload)
	}
	if r.Project != "" {
		b = append(b, `,"project":`...)
		b = appendString(b, r.Project)
	}
	if r.State != "" {
		b = append(b, `,"state":`...)
		b = appendString(b, string(r.State))
	}
	if r.Message != "" {
		b = append(b, `,"message":`...)
		b = appendString(b, r.Message)
	}
	if r.Exit != nil {
		b = append(b, `,"exit":`...)
		b = r.Exit.appendJSON(b)
	}
	if r.By != 0 {
		b = append(b, `,"by":`...)
		b = strconv.AppendUint(b, uint64(r.By), 10)
	}
	return append(b, '}'), nil
}

// AppendJSON appends r as json.Marshal encodes it, for the records that
// keep an exit beside other fields; what json.Marshal refuses (a time past
// the year 9999) it refuses too, with b as it was.
func (r *ExitRecord) AppendJSON(b []byte) ([]byte, error) {
	if r == nil {
		return append(b, "null"...), nil
	}
	if err := encodable(r.At); err != nil {
		return b, err
	}
	return r.appendJSON(b), nil
}

// appendJSON is AppendJSON of an encodable record.
func (r *ExitRecord) appendJSON(b []byte) []byte {
	b = append(b, `{"code":`...)
	b = strconv.AppendInt(b, int64(r.Code), 10)
	if r.Signal != "" {
		b = append(b, `,"signal":`...)
		b = appendString(b, r.Signal)
	}
	b = append(b, `,"at":`...)
	b = appendTime(b, r.At)
	if r.Unknown {
		b = append(b, `,"unknown":true`...)
	}
	if r.Reason != "" {
		b = append(b, `,"reason":`...)
		b = appendString(b, r.Reason)
	}
	b = append(b, `,"description":`...)
	b = appendString(b, r.Description)
	return append(b, '}')
}

// AppendJSONTime appends t as json.Marshal encodes it, or refuses what
// json.Marshal refuses (a year past 9999), with b as it was.
func AppendJSONTime(b []byte, t time.Time) ([]byte, error) {
	if err := encodable(t); err != nil {
		return b, err
	}
	return appendTime(b, t), nil
}

// AppendJSONString appends s as json.Marshal encodes it.
func AppendJSONString(b []byte, s string) []byte { return appendString(b, s) }

// encodable is json.Marshal's error for a time it cannot encode.
func encodable(t time.Time) error {
	if y := t.Year(); y < 0 || y > 9999 {
		_, err := json.Marshal(t)
		return err
	}
	return nil
}

// appendTime is time.Time's JSON, for a time that is encodable.
func appendTime(b []byte, t time.Time) []byte {
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

// appendString is a string's JSON as json.Marshal writes it: a string of
// printable ASCII that needs no escape as it is, any other through it.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			out, _ := json.Marshal(s)
			return append(b, out...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
