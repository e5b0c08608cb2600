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
}

// NewBook keeps the logs of dir, each rotated at maxSize keeping
// generations rotated files. It touches no file.
func NewBook(dir string, maxSize int64, generations int) *Book {
	return &Book{dir: dir, maxSize: maxSize, generations: generations, logs: map[string]*Log{}}
}

// Path is where name's live file is.
func (b *Book) Path(name string) string { return filepath.Join(b.dir, name+".log") }

// Of is name's log.
func (b *Book) Of(name string) *Log {
	b.mu.Lock()
	defer b.mu.Unlock()
	l, ok := b.logs[name]
	if !ok {
		l = NewLog(b.Path(name), b.maxSize, b.generations)
		b.logs[name] = l
	}
	return l
}

// Remove deletes name's log files, whether or not its log was in use; a
// log of that name asked for later starts anew.
func (b *Book) Remove(name string) error {
	b.mu.Lock()
	l, ok := b.logs[name]
	delete(b.logs, name)
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
