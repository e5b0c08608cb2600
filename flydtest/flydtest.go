// Package flydtest gives a Go test a stack of its own in a running flyd
// daemon: a project named after the test, brought up from a directory of
// spec files or from documents built in Go, waited for, read (addresses by
// module/service/endpoint, the environment a consumer of it gets, logs),
// run in (a command inside its network), and taken down by t.Cleanup,
// named volumes too, whether the test passes, fails or panics.
//
// Tests that call t.Parallel never collide: every project's name is the
// test's with a random suffix, and a project's networks, ports and names
// are its own.
//
//	func TestCheckout(t *testing.T) {
//		t.Parallel()
//		p := flydtest.Start(t, flydtest.Dir("testdata/stack"))
//		resp, err := http.Get(p.URL("shop/api/http") + "/health")
//		...
//	}
package flydtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/flyd-dev/flyd/api"
	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/specload"
)

// Source is what a project is made of: Dir or Docs.
type Source func(reading) (*spec.Documents, error)

// reading is how Start has a Source read: the options that concern files.
type reading struct{ envFiles []string }

// Dir reads every spec file of a directory, as `flyd up -f DIR` does: its
// .env (or the EnvFile options' files), env_file entries and ${VAR}s from
// the test's environment. Which profiles' workloads come up is Start's
// Profiles option.
func Dir(dir string) Source {
	return func(r reading) (*spec.Documents, error) {
		return specload.Client{Environ: os.Environ(), EnvFiles: r.envFiles, Warn: func(string) {}}.ReadPath(dir)
	}
}

// Docs takes documents built in Go: workloads, and documents of any kind
// (networks, policies, workspaces).
func Docs(docs ...any) Source {
	return func(reading) (*spec.Documents, error) {
		d := &spec.Documents{}
		for _, doc := range docs {
			switch v := doc.(type) {
			case *spec.Workload:
				d.Workloads = append(d.Workloads, v.Clone())
			case spec.Document:
				d.Docs = append(d.Docs, v.CloneDocument())
			default:
				return nil, fmt.Errorf("flydtest: %T is not a document (a *spec.Workload or a spec.Document)", doc)
			}
		}
		return d, nil
	}
}

// Option changes how Start starts a project.
type Option func(*options)

type options struct {
	socket   string
	timeout  time.Duration
	keep     bool
	profiles []string
	envFiles []string
	grace    time.Duration
}

// Profiles brings up the workloads of these profiles too, as `flyd up
// --profile` does ("*" for all of them); without it, those of
// FLYD_PROFILES. A workload with profiles none of which is asked for is
// left out.
func Profiles(names ...string) Option {
	return func(o *options) { o.profiles = append(o.profiles, names...) }
}

// EnvFile reads a Dir's ${VAR}s from these files in place of the .env
// beside the specs, as `flyd up --env-file` does.
func EnvFile(paths ...string) Option {
	return func(o *options) { o.envFiles = append(o.envFiles, paths...) }
}

// Grace is how long the project outlives the test's process when that is
// killed (a CI timeout's SIGKILL, which runs no cleanup): the daemon takes
// it down once the process has been gone that long (10 s by default).
func Grace(d time.Duration) Option { return func(o *options) { o.grace = d } }

// Socket is the daemon's socket; by default FLYD_SOCKET's, or that of
// FLYD_HOME, or the system daemon's.
func Socket(path string) Option { return func(o *options) { o.socket = path } }

// Timeout bounds how long the project may take to come up (a minute).
func Timeout(d time.Duration) Option { return func(o *options) { o.timeout = d } }

// KeepOnFailure leaves a failed test's project up, to be looked at; it is
// named in the test's log.
func KeepOnFailure() Option { return func(o *options) { o.keep = true } }

// Project is a test's stack in the daemon.
type Project struct {
	// Name is the project's: the test's name made a DNS label, with a
	// random suffix.
	Name string
	t    testing.TB
	c    *api.Client
}

// Start brings up the project src says, named after t, and waits until
// every workload of it is up (running and healthy, or completed); it fails
// the test, showing each workload's last log lines, if one is not. The
// project is taken down when the test ends, pass, fail or panic.
func Start(t testing.TB, src Source, opts ...Option) *Project {
	t.Helper()
	o := options{socket: os.Getenv("FLYD_SOCKET"), timeout: time.Minute}
	for _, opt := range opts {
		opt(&o)
	}
	if o.socket == "" {
		o.socket = api.HomeSocket()
	}
	p := &Project{Name: ProjectName(t.Name()), t: t, c: api.NewClient(o.socket)}
	docs, err := src(reading{envFiles: o.envFiles})
	if err != nil {
		t.Fatalf("flydtest: %v", err)
	}
	profiles, err := specload.Profiles(o.profiles, os.Getenv("FLYD_PROFILES"))
	if err != nil {
		t.Fatalf("flydtest: %v", err)
	}
	sel, err := specload.Select(docs, profiles)
	if err != nil {
		t.Fatalf("flydtest: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	// Bound to this process before it is made: a test binary killed
	// without its cleanups (a CI timeout) leaves nothing for long.
	release, err := p.c.Hold(ctx, p.Name, api.LeaseOptions{Grace: o.grace, Volumes: true})
	if err != nil {
		t.Fatalf("flydtest: project %s: %v", p.Name, err)
	}
	t.Cleanup(func() {
		if o.keep && t.Failed() {
			p.keep(release)
			return
		}
		p.down()
		release()
		p.c.Close()
	})
	var keep []string
	for _, l := range sel.LeftOut {
		keep = append(keep, l.Name)
	}
	ch, err := p.c.Up(ctx, p.Name, api.Documents{Workloads: docs.Workloads, Docs: docs.Docs, Keep: keep}, api.ApplyOptions{Start: true})
	if err == nil {
		err = changeErr(ch)
	}
	if err != nil {
		t.Fatalf("flydtest: project %s: %v", p.Name, err)
	}
	if err := p.waitUp(ctx); err != nil {
		t.Fatalf("flydtest: project %s: %v", p.Name, err)
	}
	return p
}

// ProjectName is the project name for a test: its name as a DNS label,
// with a random suffix, at most 63 characters.
func ProjectName(test string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(test) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	base := strings.Trim(b.String(), "-")
	if len(base) > 50 {
		base = strings.TrimRight(base[:50], "-")
	}
	var r [3]byte
	_, _ = rand.Read(r[:])
	if base == "" {
		return "t-" + hex.EncodeToString(r[:])
	}
	return base + "-" + hex.EncodeToString(r[:])
}

// changeErr is every failure of a project's change.
func changeErr(ch *api.ProjectChange) error {
	var errs []error
	for _, r := range append(ch.Applied, ch.Removed...) {
		if err := r.Err(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", r.Name, err))
		}
	}
	return errors.Join(append(errs, ch.Err())...)
}

// waitUp waits until every workload of the project is up, as the daemon
// judges (flyd apply --wait).
func (p *Project) waitUp(ctx context.Context) error {
	for {
		ws, err := p.Workloads()
		if err != nil {
			return err
		}
		var pending []string
		for _, w := range ws {
			switch {
			case w.NotUp != "":
				return fmt.Errorf("%s is not up: %s%s", w.Name, w.NotUp, p.tail(w.Name))
			case !w.Up:
				pending = append(pending, w.Name)
			}
		}
		if len(pending) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			var tails string
			for _, n := range pending {
				tails += p.tail(n)
			}
			return fmt.Errorf("not up in time: %s%s", strings.Join(pending, ", "), tails)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// tail is the end of a workload's log, for a failure's message.
func (p *Project) tail(name string) string {
	var b bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.c.Logs(ctx, name, api.LogQuery{Tail: 20}, api.WriteLog(&b)); err != nil || b.Len() == 0 {
		return ""
	}
	return "\n--- the last lines of " + name + "'s log:\n" + b.String()
}

func (p *Project) down() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ch, err := p.c.Down(ctx, p.Name, api.RemoveOptions{Force: true, Volumes: true})
	if err == nil {
		err = changeErr(ch)
	}
	if err != nil {
		p.t.Errorf("flydtest: taking project %s down: %v", p.Name, err)
	}
}

// keep leaves a failed test's project up, bound to no one.
func (p *Project) keep(release func()) {
	release()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.c.Lease(ctx, p.Name, api.LeaseOptions{}); err != nil {
		p.t.Logf("flydtest: project %s stays bound to this test and goes with it: %v", p.Name, err)
	} else {
		p.t.Logf("flydtest: project %s is left up (flyd down -p %s)", p.Name, p.Name)
	}
	p.c.Close()
}

// Client is the daemon's client, for what this package does not wrap.
func (p *Project) Client() *api.Client { return p.c }

// Workloads lists the project's workloads, by full name (PROJECT.NAME).
func (p *Project) Workloads() ([]api.Workload, error) {
	ws, err := p.c.List(context.Background())
	if err != nil {
		return nil, err
	}
	out := ws[:0]
	for _, w := range ws {
		if spec.ProjectOf(w.Name) == p.Name {
			out = append(out, w)
		}
	}
	return out, nil
}

// Addr is the address the test reaches an endpoint at, host:port, named
// module/service/endpoint by the workload's identity (a workload without
// one is module and service of its own name: "db/db/tcp"). It fails the
// test if there is none.
func (p *Project) Addr(ref string) string {
	p.t.Helper()
	m, err := p.endpoint(ref)
	if err != nil {
		p.t.Fatalf("flydtest: %v", err)
	}
	return m.Address("native")
}

// URL is Addr as http://host:port.
func (p *Project) URL(ref string) string {
	p.t.Helper()
	return "http://" + p.Addr(ref)
}

// endpoint finds the mapping of module/service/endpoint.
func (p *Project) endpoint(ref string) (api.PortMapping, error) {
	parts := strings.Split(ref, "/")
	if len(parts) != 3 {
		return api.PortMapping{}, fmt.Errorf("%q: an endpoint is named module/service/endpoint", ref)
	}
	ids, err := p.identities()
	if err != nil {
		return api.PortMapping{}, err
	}
	ports, err := p.c.Ports(context.Background())
	if err != nil {
		return api.PortMapping{}, err
	}
	for _, m := range ports {
		id, ok := ids[m.Workload]
		if ok && id.Module == parts[0] && id.Service == parts[1] && m.Endpoint == parts[2] {
			return m, nil
		}
	}
	return api.PortMapping{}, fmt.Errorf("project %s has no endpoint %s", p.Name, ref)
}

// identities are the project's workloads' identities, by full name.
func (p *Project) identities() (map[string]spec.Identity, error) {
	ws, err := p.Workloads()
	if err != nil {
		return nil, err
	}
	out := map[string]spec.Identity{}
	for _, w := range ws {
		v, err := p.c.Get(context.Background(), w.Name)
		if err != nil {
			return nil, err
		}
		out[w.Name] = v.Spec.Identified()
	}
	return out, nil
}

// Env is the environment a consumer on the host gets of every endpoint of
// the project, as `uses` gives it: codefly's CODEFLY__ENDPOINT__MODULE__
// SERVICE__ENDPOINT__API names, URLs for HTTP-based APIs.
func (p *Project) Env() map[string]string {
	p.t.Helper()
	ids, err := p.identities()
	if err != nil {
		p.t.Fatalf("flydtest: %v", err)
	}
	ports, err := p.c.Ports(context.Background())
	if err != nil {
		p.t.Fatalf("flydtest: %v", err)
	}
	env := map[string]string{}
	for _, m := range ports {
		id, ok := ids[m.Workload]
		if !ok {
			continue
		}
		addr := m.Address("native")
		if spec.HTTPBased(m.API) {
			addr = "http://" + addr
		}
		env[spec.EndpointVar(id.Module, id.Service, m.Endpoint, m.API)] = addr
	}
	return env
}

// Run runs argv once inside the project's network (its only one, or the
// host's), as a consumer of every workload with endpoints, and returns
// what it wrote and its exit code. An error is one of running it, not its
// exit status.
func (p *Project) Run(argv ...string) (output string, code int, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir, _ := os.Getwd()
	w, err := p.c.Consumer(ctx, p.Name, "", dir, argv)
	if err != nil {
		return "", 0, err
	}
	var b bytes.Buffer
	code, err = p.c.RunOnce(ctx, w, &b)
	return b.String(), code, err
}

// Logs is what a workload of the project has written, by its name in the
// project.
func (p *Project) Logs(name string) string {
	p.t.Helper()
	var b bytes.Buffer
	if err := p.c.Logs(context.Background(), spec.FullName(p.Name, name), api.LogQuery{Tail: -1}, api.WriteLog(&b)); err != nil {
		p.t.Fatalf("flydtest: logs of %s: %v", name, err)
	}
	return b.String()
}
