package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/flyd-dev/flyd/api"
)

func init() {
	register("logs", command{"print workloads' logs", "[-f] [--tail N] NAME... | --all", cmdLogs})
	register("events", command{"stream the daemon's events, across daemon restarts", "[--reconnect D]", cmdEvents})
	register("version", command{"print the version", "", cmdVersion})
}

func cmdLogs(ctx context.Context, c *cli, args []string) error {
	fs := c.flags()
	follow := fs.Bool("f", false, "follow the logs as they grow")
	fs.BoolVar(follow, "follow", false, "same as -f")
	tail := fs.Int("tail", -1, "print only the last N lines of each; -1 prints all")
	all := fs.Bool("all", false, "every workload")
	pos, err := c.parse(fs, args)
	if err != nil {
		return err
	}
	names := pos
	if *all {
		if len(pos) > 0 {
			return usagef("names or --all, not both")
		}
		ws, err := c.client.List(ctx)
		if err != nil {
			return err
		}
		names = make([]string, len(ws))
		for i, w := range ws {
			names[i] = w.Name
		}
	}
	switch {
	case len(names) == 0 && !*all:
		return usagef("a workload name, or --all, is needed")
	case len(names) == 0:
		return nil
	case len(names) == 1 && !*all:
		return c.followable(ctx, *follow, c.client.Logs(ctx, names[0], c.stdout, *tail, *follow))
	}
	// Several: every line with its workload's name in front; with -f,
	// the streams interleave as their lines come.
	out := newLineMux(c.stdout, names)
	if !*follow {
		for _, n := range names {
			if err := c.client.Logs(ctx, n, out.prefixed(n), *tail, false); err != nil {
				return fmt.Errorf("%s: %w", n, err)
			}
			out.flush(n)
		}
		return nil
	}
	// One refused (a name not found) ends them all.
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, len(names))
	for _, n := range names {
		go func() {
			err := c.client.Logs(fctx, n, out.prefixed(n), *tail, true)
			out.flush(n)
			if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
				cancel()
				err = fmt.Errorf("%s: %w", n, err)
			}
			errs <- err
		}()
	}
	var first error
	for range names {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return c.followable(ctx, true, first)
}

// followable turns the end of a follow that the caller did not ask for,
// which only a daemon going away causes, into an error that says so.
func (c *cli) followable(ctx context.Context, follow bool, err error) error {
	if follow && ctx.Err() == nil && (err == nil || errors.Is(err, io.ErrUnexpectedEOF)) {
		return errors.New("the daemon went away; the log was followed up to here (follow it again once the daemon is back)")
	}
	return err
}

// lineMux writes whole lines of several logs to one writer, each with its
// workload's name in front (coloured on a terminal), so that lines of
// different workloads never mix mid-line.
type lineMux struct {
	w      io.Writer
	mu     sync.Mutex
	prefix map[string]string
	parts  map[string][]byte // a workload's line begun but not ended
}

// prefixColours are ANSI colours that read on dark and light terminals.
var prefixColours = []string{"36", "33", "32", "35", "34", "31"}

func newLineMux(w io.Writer, names []string) *lineMux {
	width := 0
	for _, n := range names {
		width = max(width, len(n))
	}
	colour := isTerminalWriter(w)
	m := &lineMux{w: w, prefix: map[string]string{}, parts: map[string][]byte{}}
	for i, n := range names {
		p := fmt.Sprintf("%-*s | ", width, n)
		if colour {
			p = "\x1b[" + prefixColours[i%len(prefixColours)] + "m" + p + "\x1b[0m"
		}
		m.prefix[n] = p
	}
	return m
}

// prefixed is the writer of name's log.
func (m *lineMux) prefixed(name string) io.Writer {
	return writerFunc(func(p []byte) (int, error) {
		m.mu.Lock()
		defer m.mu.Unlock()
		buf := append(m.parts[name], p...)
		for {
			nl := bytes.IndexByte(buf, '\n')
			if nl < 0 {
				break
			}
			if _, err := io.WriteString(m.w, m.prefix[name]+string(buf[:nl+1])); err != nil {
				return 0, err
			}
			buf = buf[nl+1:]
		}
		m.parts[name] = append([]byte(nil), buf...)
		return len(p), nil
	})
}

// flush writes what is left of name's last line, ended with a newline.
func (m *lineMux) flush(name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if rest := m.parts[name]; len(rest) > 0 {
		_, _ = io.WriteString(m.w, m.prefix[name]+string(rest)+"\n")
		delete(m.parts, name)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func isTerminalWriter(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && isTerminal(f)
}

func cmdEvents(ctx context.Context, c *cli, args []string) error {
	fs := c.flags()
	patience := fs.Duration("reconnect", 30*time.Second, "how long to wait for a daemon that went away (a restart) before giving up; 0 gives up at once")
	if _, err := c.parse(fs, args); err != nil {
		return err
	}
	ch, err := c.client.Events(ctx)
	if err != nil {
		return err
	}
	for {
		for ev := range ch {
			if c.json {
				if err := printJSONLine(c.stdout, ev); err != nil {
					return err
				}
				continue
			}
			printEvent(c.stdout, ev)
		}
		if ctx.Err() != nil {
			return nil
		}
		if ch, err = reconnect(ctx, c, *patience); err != nil {
			return err
		}
	}
}

// reconnect opens a stream again after the daemon ended it, as a daemon
// restart does, trying for up to patience. What happened while no daemon
// answered is not replayed: reconnect says so on stderr.
func reconnect(ctx context.Context, c *cli, patience time.Duration) (<-chan api.Event, error) {
	if patience <= 0 {
		return nil, errors.New("the daemon ended the stream")
	}
	fmt.Fprintf(c.stderr, "flyd %s: the daemon went away; waiting up to %s for it\n", c.name, patience)
	deadline := time.Now().Add(patience)
	for {
		s, err := c.client.Events(ctx)
		if err == nil {
			fmt.Fprintf(c.stderr, "flyd %s: reconnected; what happened while no daemon answered is not repeated\n", c.name)
			return s, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the daemon did not come back within %s: %w", patience, err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func cmdVersion(ctx context.Context, c *cli, args []string) error {
	fs := c.flags()
	if _, err := c.parse(fs, args); err != nil {
		return err
	}
	if c.json {
		return printJSONLine(c.stdout, map[string]string{"version": version})
	}
	fmt.Fprintf(c.stdout, "flyd %s\n", version)
	return nil
}

func printJSONLine(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}
