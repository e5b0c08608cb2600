package supervisor

import (
	"sort"

	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/status"
)

// FileProblem records a workloads-directory file that cannot be applied
// (err nil: it is good again), for events and `flyd status`.
func (s *Supervisor) FileProblem(file string, err error) {
	s.mu.Lock()
	if err == nil {
		delete(s.fileProblems, file)
	} else {
		s.fileProblems[file] = err.Error()
	}
	s.mu.Unlock()
	ev := status.Event{Type: status.EventFile, Message: file + ": ok"}
	if err != nil {
		ev.Message = file + ": " + err.Error()
		s.log.Warn("workloads-dir file refused", zap.String("file", file), zap.Error(err))
	}
	s.publish(ev)
}

func (s *Supervisor) fileProblemList() []status.FileProblem {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]status.FileProblem, 0, len(s.fileProblems))
	for f, e := range s.fileProblems {
		out = append(out, status.FileProblem{File: f, Error: e})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].File < out[j].File })
	return out
}
