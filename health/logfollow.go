package health

import (
	"context"
	"errors"

	"github.com/flyd-dev/flyd/logfile"
)

// LogEnd is the position of the end of a log: where what comes next
// begins.
func LogEnd(l *logfile.Log) (int64, error) {
	end := int64(-1)
	err := l.Read(context.Background(), logfile.Query{Tail: 0, Follow: true}, logfile.SinkFunc(func(r logfile.Record) error {
		end = r.Pos // the mark of the end of what the log held
		return errAtEnd
	}))
	if end >= 0 {
		return end, nil
	}
	return 0, err
}

var errAtEnd = errors.New("at the end")

// FollowLog is a run's output in its log, from position from (where the
// run began), or from where the log ends when first read (from below 0:
// where the run began is not known, as for a run adopted from a daemon
// that did not keep it). Read from the log file, not in the pipe's
// reader: nothing is added to the path of every workload's output, and a
// run that writes its log itself (a containerd shim) is read alike.
func FollowLog(l *logfile.Log, from int64) Follow {
	pos := from
	return func(ctx context.Context, out func([]byte) error) error {
		if pos < 0 {
			end, err := LogEnd(l)
			if err != nil {
				return err
			}
			pos = end
		}
		return l.Read(ctx, logfile.Query{From: &pos, Follow: true}, logfile.SinkFunc(func(r logfile.Record) error {
			if len(r.Data) == 0 {
				return nil
			}
			if err := out(r.Data); err != nil {
				return err
			}
			pos = r.Pos + int64(len(r.Data))
			return nil
		}))
	}
}
