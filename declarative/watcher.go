package declarative

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/status"
)

// Applier is what the watcher drives (the daemon's supervisor and its
// documents implement it).
type Applier interface {
	// PutOwned creates or replaces the workloads, each owned by its file, as
	// one batch that the applier orders by `after`, so that a directory
	// whose files depend on each other converges in one reconcile. An equal
	// spec must change nothing (the applier handles that). It returns one
	// error per put, in order, nil where the put succeeded.
	PutOwned(ctx context.Context, puts []Put) []error
	// DeleteOwned removes the workload if owner still owns it.
	DeleteOwned(ctx context.Context, name, owner string) error
	// Owned lists the workloads currently owned by files: name → owner. Used
	// at start to delete workloads whose file was removed while the daemon
	// was down.
	Owned(ctx context.Context) (map[string]string, error)

	// The documents of files, of the kinds the directory takes
	// (spec.DocKind.InDirectory), each owned by its file as workloads
	// are: put (created or replaced), dropped when the file no longer
	// defines it, and listed (documents.Key → owner) at start.
	PutDocOwned(ctx context.Context, doc spec.Document, owner string) error
	DropDocOwned(ctx context.Context, kind, name, owner string) error
	OwnedDocuments(ctx context.Context) (map[string]string, error)
}

// Put is one workload of a file, for PutOwned.
type Put struct {
	Spec  *spec.Workload
	Owner string // the file's base name
}

// Problem is a bad file, or a put or delete that failed for the workloads of
// File. File is a base name; it is empty when the problem concerns the
// directory as a whole (it cannot be listed, or Owned failed).
type Problem struct {
	File string
	Err  error
}

// Config configures a Watcher.
type Config struct {
	Dir      string
	Applier  Applier
	Logger   *zap.Logger
	Debounce time.Duration // default 200ms: editors write in bursts
	// OnProblem is called for every new problem and when a file becomes good
	// again (Err nil); may be nil. It runs inside a reconcile, so it must not
	// call Sync.
	OnProblem func(Problem)
	// Events, if set, is told of every new problem and of a file that
	// became good again, as an event of type file, so that `flyd events`
	// shows what the directory refused without a look at the log.
	Events Publisher
	// Resync is the period of a full reconcile with no event, so that a
	// failed put or delete heals and a lost event costs little; default 30s.
	Resync time.Duration
}

// Publisher takes the watcher's events (the daemon's event bus).
type Publisher interface {
	Publish(status.Event) error
}

const (
	defaultDebounce = 200 * time.Millisecond
	defaultResync   = 30 * time.Second
)

// Watcher keeps the spec files of one directory applied.
type Watcher struct {
	dir       string
	applier   Applier
	log       *zap.Logger
	debounce  time.Duration
	resync    time.Duration
	onProblem func(Problem)
	events    Publisher
	// started says Run was called: set once, by compare-and-swap.
	started atomic.Bool

	// sem serialises reconciles (Run's and Sync's) and guards the fields
	// below it. It is a channel so that a waiting Sync can give up on ctx.
	sem     chan struct{}
	adopted bool // Owned has been read into applied
	applied map[string]applied[*spec.Workload]
	// docs are the documents of each kind: kind → name → applied.
	docs     map[string]map[string]applied[spec.Document]
	lastGood map[string]fileState // file → its last good parse

	// mu guards problems, which FileProblems reads outside a reconcile;
	// it is taken while sem is held, never the other way.
	mu       sync.Mutex
	problems map[string]error // file → what is wrong with it
}

// New checks cfg and returns a Watcher; nothing happens until Run or Sync.
func New(cfg Config) (*Watcher, error) {
	if cfg.Dir == "" {
		return nil, errors.New("declarative: no directory given")
	}
	if cfg.Applier == nil {
		return nil, errors.New("declarative: no applier given")
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, err
	}
	w := &Watcher{
		dir:       dir,
		applier:   cfg.Applier,
		log:       cfg.Logger,
		debounce:  cfg.Debounce,
		resync:    cfg.Resync,
		onProblem: cfg.OnProblem,
		events:    cfg.Events,
		sem:       make(chan struct{}, 1),
		applied:   make(map[string]applied[*spec.Workload]),
		docs:      make(map[string]map[string]applied[spec.Document]),
		lastGood:  make(map[string]fileState),
		problems:  make(map[string]error),
	}
	if w.log == nil {
		w.log = zap.NewNop()
	}
	if w.debounce <= 0 {
		w.debounce = defaultDebounce
	}
	if w.resync <= 0 {
		w.resync = defaultResync
	}
	w.log = w.log.With(zap.String("dir", dir))
	return w, nil
}

// Problems returns the current problems, sorted by file (for `flyd status`).
func (w *Watcher) Problems() []Problem {
	w.mu.Lock()
	defer w.mu.Unlock()
	return sortedProblems(w.problems)
}

// FileProblems is the current problems as the daemon's status shows them,
// sorted by file; a nil Watcher (no directory watched) has none.
func (w *Watcher) FileProblems() []status.FileProblem {
	if w == nil {
		return nil
	}
	ps := w.Problems()
	out := make([]status.FileProblem, len(ps))
	for i, p := range ps {
		out[i] = status.FileProblem{File: p.File, Error: p.Err.Error()}
	}
	return out
}

// Sync forces a reconcile now and returns when done (tests, and a
// SIGHUP-style reload). It works whether Run is running or not. Bad files and
// failed puts are not errors here but Problems; the error says that the
// reconcile could not be done: ctx ended, or the directory could not be read.
func (w *Watcher) Sync(ctx context.Context) error {
	return w.reconcile(ctx)
}
