package logfile

import (
	"path/filepath"
	"sync"
)

// Book is the one Log of each name in a directory (name.log): a log's
// writer, its rotation and its readers must share it.
type Book struct {
	dir         string
	maxSize     int64
	generations int

	// mu guards logs; Close holds it while each Log is closed (their amu
	// and mu), nothing else does.
	mu   sync.Mutex
	logs map[string]*Log
	// bounds are the logs rotated at a size of their own (Bound).
	bounds map[string]int64
}

// NewBook keeps the logs of dir, each rotated at maxSize keeping
// generations rotated files. It touches no file.
func NewBook(dir string, maxSize int64, generations int) *Book {
	return &Book{dir: dir, maxSize: maxSize, generations: generations, logs: map[string]*Log{}}
}

// Path is where name's live file is.
func (b *Book) Path(name string) string { return filepath.Join(b.dir, name+".log") }

// Log is name's log.
func (b *Book) Log(name string) *Log {
	b.mu.Lock()
	defer b.mu.Unlock()
	l, ok := b.logs[name]
	if !ok {
		l = NewLog(b.Path(name), b.maxSizeOf(name), b.generations)
		b.logs[name] = l
	}
	return l
}

// Bound has name's log, now and until it is removed, keep at most
// total bytes on disk, its rotated files included: rotated at total /
// (generations + 1), at least MinMaxSize. A total of 0, or one over the
// book's own bound, is the book's own bound.
func (b *Book) Bound(name string, total int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	own := b.maxSize
	if own <= 0 {
		own = DefaultMaxSize
	}
	size := total / int64(b.generations+1)
	if total <= 0 || size >= own {
		delete(b.bounds, name)
		size = own
	} else {
		size = max(size, MinMaxSize)
		if b.bounds == nil {
			b.bounds = map[string]int64{}
		}
		b.bounds[name] = size
	}
	if l, ok := b.logs[name]; ok {
		l.SetMaxSize(size)
	}
}

// maxSizeOf is the size name's log is rotated at. The caller holds mu.
func (b *Book) maxSizeOf(name string) int64 {
	if n, ok := b.bounds[name]; ok {
		return n
	}
	return b.maxSize
}

// Remove deletes name's log files, whether or not its log was in use; a
// log of that name asked for later starts anew.
func (b *Book) Remove(name string) error {
	b.mu.Lock()
	l, ok := b.logs[name]
	delete(b.logs, name)
	delete(b.bounds, name)
	b.mu.Unlock()
	if !ok {
		l = NewLog(b.Path(name), b.maxSize, b.generations)
	}
	return l.Remove()
}

// Close closes every log in use.
func (b *Book) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, l := range b.logs {
		_ = l.Close()
	}
}
