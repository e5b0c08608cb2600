package supervisor

import (
	"io"

	"github.com/flyd-dev/flyd/logfile"
)

// writeLog is a log sink writing the records' bytes to w.
func writeLog(w io.Writer) logfile.Sink {
	return logfile.SinkFunc(func(r logfile.Record) error {
		_, err := w.Write(r.Data)
		return err
	})
}
