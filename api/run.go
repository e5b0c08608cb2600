package api

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/spec"
)

// Consumer is argv as a one-shot of project: in network (its only
// isolated network when empty, else the host's), a consumer of every
// workload of the project that has endpoints, so that it gets what their
// `uses` give (codefly's CODEFLY__ENDPOINT__… variables), run in dir.
func (c *Client) Consumer(ctx context.Context, project, network, dir string, argv []string) (*spec.Workload, error) {
	ws, err := c.List(ctx)
	if err != nil {
		return nil, err
	}
	var uses, nets []string
	for _, w := range ws {
		if spec.ProjectOf(w.Name) == project && len(w.Ports) > 0 {
			uses = append(uses, spec.BareName(w.Name))
		}
	}
	ns, err := DocumentsOf[Network](ctx, c, spec.KindNetwork)
	if err != nil {
		return nil, err
	}
	for _, n := range ns {
		if spec.ProjectOf(n.Name) == project {
			nets = append(nets, n.Name)
		}
	}
	switch {
	case network != "":
	case len(nets) == 1:
		network = spec.BareName(nets[0])
	case len(nets) == 0:
		network = spec.NetworkHost
	default:
		return nil, fmt.Errorf("%w: project %s has %d networks (%s): name the one to run in", errdefs.ErrInvalid, project, len(nets), strings.Join(nets, ", "))
	}
	// A name to tell runs apart, not a secret: the runtime's generator,
	// seeded at start, without crypto/rand's initialisation in every CLI
	// call.
	n := rand.Uint32()
	b := [3]byte{byte(n), byte(n >> 8), byte(n >> 16)}
	w := &spec.Workload{Name: "run-" + hex.EncodeToString(b[:]), Project: project, Command: argv, Workdir: dir,
		Network: network, Uses: uses, Restart: spec.Restart{Policy: spec.RestartNever}}
	w.SetDefaults()
	return w, w.Validate()
}

// RunOnce runs the one-shot w to its end, its output written to out as it
// comes, then removes it, and answers its exit code (128+N for a signal).
func (c *Client) RunOnce(ctx context.Context, w *spec.Workload, out io.Writer) (int, error) {
	name := spec.FullName(w.Project, spec.BareName(w.Name))
	defer func() {
		rm, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		_ = c.Remove(rm, name, RemoveOptions{})
	}()
	if _, err := c.Apply(ctx, w, ApplyOptions{Start: true}); err != nil {
		return 0, err
	}
	var next int64
	drain := func() error {
		from := next
		return c.Logs(ctx, name, LogQuery{From: &from}, LogFunc(func(r LogRecord) error {
			next = r.End()
			_, err := out.Write(r.Data)
			return err
		}))
	}
	for {
		if err := drain(); err != nil {
			return 0, err
		}
		v, err := c.Get(ctx, name)
		if err != nil {
			return 0, err
		}
		switch v.State {
		case StateExited, StateFailed, StateStopped:
			// What it wrote before its exit was published is in its log.
			if err := drain(); err != nil {
				return 0, err
			}
			switch {
			case v.LastExit != nil && v.LastExit.Signal != "":
				sig, _ := spec.ParseSignal(v.LastExit.Signal)
				return 128 + int(sig), nil
			case v.LastExit != nil:
				return v.LastExit.Code, nil
			}
			return 0, fmt.Errorf("%s did not run: %s", strings.Join(w.Command, " "), v.LastError)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
