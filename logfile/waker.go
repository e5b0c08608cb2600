package logfile

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Waker says when a quiet file is written again. It is one inotify
// instance for every file, with a one-shot watch per file armed by Arm:
// a file that stays quiet costs nothing until it is written, where a
// check on a timer costs a stat each time, and the first write after
// arming is known at once. The kernel drops a one-shot watch after its
// event, so a file written all the time is never watched: a file's
// checks back off while it is quiet, and arm the Waker only then.
type Waker struct {
	fd   int
	f    *os.File // fd, read through the runtime's poller
	wake func(key string)

	mu   sync.Mutex       // guards keys and wake; never held while wake is called
	keys map[int32]string // watch descriptor → key
}

// NewWaker starts a Waker that calls wake, from a goroutine of its own,
// with the key of each armed file that is written, moved or removed.
func NewWaker(wake func(key string)) (*Waker, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("inotify: %w", err)
	}
	w := &Waker{fd: fd, f: os.NewFile(uintptr(fd), "inotify"), wake: wake, keys: map[int32]string{}}
	go w.read()
	return w, nil
}

// Arm has wake(key) called at the next write to path, or when path is
// moved or removed, once. Arming a file again before that changes
// nothing. It fails when the watches run out (fs.inotify.max_user_watches):
// then the caller checks the file as it did before.
func (w *Waker) Arm(path, key string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	wd, err := unix.InotifyAddWatch(w.fd, path, unix.IN_MODIFY|unix.IN_DELETE_SELF|unix.IN_MOVE_SELF|unix.IN_ONESHOT)
	if err != nil {
		return fmt.Errorf("watch %s: %w", path, err)
	}
	w.keys[int32(wd)] = key
	return nil
}

// Close stops the Waker: no wake begins after it returns.
func (w *Waker) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.wake = func(string) {}
	return w.f.Close()
}

func (w *Waker) read() {
	var buf [64 * (unix.SizeofInotifyEvent + unix.NAME_MAX + 1)]byte
	for {
		n, err := w.f.Read(buf[:])
		if err != nil {
			if !errors.Is(err, os.ErrClosed) {
				w.wakeAll() // whatever was armed may have been written
			}
			return
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			off += unix.SizeofInotifyEvent + int(ev.Len)
			switch {
			case ev.Mask&unix.IN_Q_OVERFLOW != 0:
				w.wakeAll()
			case ev.Mask&unix.IN_IGNORED != 0:
				// The watch is gone (after its one event, or its file's).
				w.mu.Lock()
				delete(w.keys, ev.Wd)
				w.mu.Unlock()
			default:
				w.mu.Lock()
				key, ok := w.keys[ev.Wd]
				delete(w.keys, ev.Wd)
				wake := w.wake
				w.mu.Unlock()
				if ok {
					wake(key)
				}
			}
		}
	}
}

// wakeAll wakes every armed key: what events said of them was lost.
func (w *Waker) wakeAll() {
	w.mu.Lock()
	keys := make([]string, 0, len(w.keys))
	for _, k := range w.keys {
		keys = append(keys, k)
	}
	wake := w.wake
	w.mu.Unlock()
	for _, k := range keys {
		wake(k)
	}
}
