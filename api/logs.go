package api

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"time"
)

// LogQuery says what of a workload's log to read:
// GET /v1/workloads/{name}/logs?tail=N&since=T&from=POS&follow=1.
type LogQuery struct {
	// Tail is how many of the last lines; -1 every line of the current
	// file, or since Since.
	Tail int
	// Since, unless zero, leaves out lines written before it.
	Since time.Time
	// From, when set, resumes at a position: a record's Pos plus its
	// length. It overrides Tail and Since.
	From *int64
	// Follow goes on with what is written next.
	Follow bool
}

// LogRecord is a line of a log, or the part of one written so far (Data
// does not end in a newline then, and the rest comes next). Pos is the
// position of its first byte in the log, which stays the byte's across
// rotations and daemon restarts; Time is when it had been written by
// (see docs/daemon.md, "Logs"). While following, a record without Data says
// that what the log held when the stream began has all been sent.
type LogRecord struct {
	Pos  int64
	Time time.Time
	Data []byte
}

// End is the position right after the record: where to resume.
func (r LogRecord) End() int64 { return r.Pos + int64(len(r.Data)) }

// LogSink receives a log's records. Flush is called whenever what was
// read at once has been given, so a sink that buffers knows when to send.
type LogSink interface {
	Record(LogRecord) error
	Flush()
}

// LogFunc is a LogSink that needs no flush.
type LogFunc func(LogRecord) error

func (f LogFunc) Record(r LogRecord) error { return f(r) }
func (LogFunc) Flush()                     {}

// WriteLog is the sink that writes the records' bytes to w, as the log
// holds them.
func WriteLog(w io.Writer) LogFunc {
	return func(r LogRecord) error {
		if len(r.Data) == 0 {
			return nil
		}
		_, err := w.Write(r.Data)
		return err
	}
}

func (q LogQuery) values(records bool) url.Values {
	v := url.Values{"tail": {strconv.Itoa(q.Tail)}}
	if !q.Since.IsZero() {
		v.Set("since", q.Since.Format(time.RFC3339Nano))
	}
	if q.From != nil {
		v.Set("from", strconv.FormatInt(*q.From, 10))
	}
	if q.Follow {
		v.Set("follow", "1")
	}
	if records {
		v.Set("format", "records")
	}
	return v
}

// The records format (format=records) frames each record as a line
// "POS UNIXNANO LEN\n" followed by LEN bytes of data (streamSink writes
// it). The plain text format is the data alone.

// maxLogRecord bounds a record's data on the wire; the daemon sends at
// most 64 KiB at once.
const maxLogRecord = 1 << 20

func readLogRecords(rd io.Reader, emit func(LogRecord) error) error {
	br := bufio.NewReaderSize(rd, 64<<10)
	var data []byte
	for {
		head, err := br.ReadSlice('\n')
		if err == io.EOF && len(head) == 0 {
			return nil
		}
		if err != nil {
			return unexpectedEOF(err)
		}
		var pos, nanos int64
		var n int
		if _, err := fmt.Sscanf(string(head), "%d %d %d\n", &pos, &nanos, &n); err != nil || n < 0 || n > maxLogRecord {
			return fmt.Errorf("a log record's head is malformed: %q", head)
		}
		if cap(data) < n {
			data = make([]byte, n)
		}
		data = data[:n]
		if _, err := io.ReadFull(br, data); err != nil {
			return unexpectedEOF(err)
		}
		if err := emit(LogRecord{Pos: pos, Time: time.Unix(0, nanos), Data: data}); err != nil {
			return err
		}
	}
}

func unexpectedEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// Logs reads a workload's log, giving out each record; out must not keep
// Data past Record's return. A stream that ended because the daemon
// went away returns an error wrapping io.ErrUnexpectedEOF, so that a
// follower knows to resume from its last record's End. One ended by ctx
// returns nil.
func (c *Client) Logs(ctx context.Context, name string, q LogQuery, out LogSink) error {
	resp, err := c.send(ctx, "GET", workloadPath(name, "logs"), q.values(true), nil)
	if err != nil {
		if ctx.Err() != nil {
			return nil // ended by the caller before the stream began
		}
		return err
	}
	defer resp.body.Close()
	err = readLogRecords(resp.body, out.Record)
	if ctx.Err() != nil {
		return nil
	}
	if err == nil && q.Follow {
		err = io.ErrUnexpectedEOF // a follow ends only with ctx
	}
	return err
}
