package logfile

import (
	"errors"
	"io"
	"io/fs"
	"os"
)

// tailChunk is how much Tail reads per step while walking backwards; a
// variable so tests can make lines straddle chunk boundaries.
var tailChunk = 32 << 10

// Tail writes the last n lines of the log at path to w. The generations
// and the live file are read as one stream, oldest first, so a line that
// a rotation split between path.1 and the live file counts once. It reads
// the live file first and the newest generations only while it still
// needs lines, walking backwards in chunks so the cost follows n, not the
// file size. A final line without a newline counts as a line.
//
// n < 0 writes the whole live file and no generation; n == 0 writes
// nothing (Follow then streams only what comes next). A missing live
// file or generation reads as empty: the workload may not have written
// anything yet, and a failed rotation can leave a gap. Tail takes no
// lock, so while a rotation is under way it may repeat or miss some of
// what is being moved; use Follow for an exact stream.
func Tail(w io.Writer, path string, n int, generations int) error {
	live, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return tailFrom(w, nil, 0, path, n, generations)
	}
	if err != nil {
		return err
	}
	defer live.Close()
	fi, err := live.Stat()
	if err != nil {
		return err
	}
	return tailFrom(w, live, fi.Size(), path, n, generations)
}

// segment is one file of the stream, read up to size only: Follow needs
// the tail to end exactly where it starts following.
type segment struct {
	f    *os.File
	size int64
}

// tailFrom is Tail with the live file already open (nil if missing) and
// cut at size.
func tailFrom(w io.Writer, live *os.File, size int64, path string, n, generations int) error {
	if n == 0 {
		return nil
	}
	if n < 0 {
		if live == nil {
			return nil
		}
		_, err := io.Copy(w, io.NewSectionReader(live, 0, size))
		return err
	}
	segs := []segment{{live, size}} // newest first
	defer func() {
		for _, s := range segs[1:] {
			s.f.Close()
		}
	}()
	s := newLineScanner(n)
	for k := 0; ; {
		found, start, err := s.scan(segs[len(segs)-1])
		if err != nil {
			return err
		}
		if found {
			return writeSegments(w, segs, start)
		}
		var next segment
		for next.f == nil && k < generations {
			k++
			f, fi, err := openGeneration(path, k)
			if err != nil {
				return err
			}
			if f != nil {
				next = segment{f, fi.Size()}
			}
		}
		if next.f == nil {
			return writeSegments(w, segs, 0)
		}
		segs = append(segs, next)
	}
}

// writeSegments writes the oldest segment from start and every newer one
// whole.
func writeSegments(w io.Writer, segs []segment, start int64) error {
	for i := len(segs) - 1; i >= 0; i-- {
		s := segs[i]
		if s.f == nil {
			continue
		}
		if _, err := io.Copy(w, io.NewSectionReader(s.f, start, s.size-start)); err != nil {
			return err
		}
		start = 0
	}
	return nil
}

// lineScanner walks a stream backwards, segment by segment, counting
// newlines until it has seen the start of the n-th last line.
type lineScanner struct {
	remaining int
	// atEnd is true until the first byte of the stream has been looked
	// at: a newline there ends the last line rather than starting one.
	atEnd bool
	buf   []byte
}

func newLineScanner(n int) *lineScanner {
	return &lineScanner{remaining: n, atEnd: true, buf: make([]byte, tailChunk)}
}

// scan reports whether the wanted lines start inside seg and at which
// offset; otherwise the scanner remembers how many it still needs.
func (s *lineScanner) scan(seg segment) (bool, int64, error) {
	if seg.f == nil {
		return false, 0, nil
	}
	for end := seg.size; end > 0; {
		begin := max(0, end-int64(len(s.buf)))
		chunk := s.buf[:end-begin]
		n, err := seg.f.ReadAt(chunk, begin)
		if err != nil && !errors.Is(err, io.EOF) {
			return false, 0, err
		}
		// Short only if a rotation truncated the file under us; scan what
		// is really there rather than stale buffer bytes.
		chunk = chunk[:n]
		for i := len(chunk) - 1; i >= 0; i-- {
			if s.atEnd {
				s.atEnd = false
				if chunk[i] == '\n' {
					continue
				}
			}
			if chunk[i] != '\n' {
				continue
			}
			s.remaining--
			if s.remaining == 0 {
				return true, begin + int64(i) + 1, nil
			}
		}
		end = begin
	}
	return false, 0, nil
}
