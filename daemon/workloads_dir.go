package daemon

import (
	"context"

	"github.com/flyd-dev/flyd/declarative"
	"github.com/flyd-dev/flyd/documents"
	"github.com/flyd-dev/flyd/supervisor"
)

// fileApplier is the supervisor and the documents as the workloads
// directory drives them: every put of a reconcile is one ordered batch, so
// files that name each other in `after` converge at once, whatever their
// names' order.
type fileApplier struct {
	*supervisor.Supervisor
	*documents.Documents
}

func (a fileApplier) PutOwned(ctx context.Context, puts []declarative.Put) []error {
	changes := make([]supervisor.Change, len(puts))
	at := make(map[string]int, len(puts))
	for i, p := range puts {
		changes[i] = supervisor.Change{Spec: p.Spec, Options: supervisor.ApplyOptions{Start: true, Owner: p.Owner}}
		at[p.Spec.Name] = i
	}
	errs := make([]error, len(puts))
	outs, err := a.ApplyAll(ctx, changes)
	if err != nil {
		// A cycle across files refuses the batch: applied one by one, only
		// the workloads of the cycle are refused, each with its own error.
		for i, c := range changes {
			_, errs[i] = a.Apply(ctx, c.Spec, c.Options)
		}
		return errs
	}
	for _, o := range outs {
		errs[at[o.Name]] = o.Err
	}
	return errs
}
