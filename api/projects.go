package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/spec"
)

// Documents are a project's documents, as its files say. On the wire each
// kind of spec.DocKinds has its own key, the kind's plural ("networks",
// "policies", "workspaces"), beside "workloads" and "keep".
type Documents struct {
	Workloads []*spec.Workload
	// Docs are the documents of the other kinds, in any order.
	Docs []spec.Document
	// Keep names workloads the files define that this up leaves out (by
	// profile): kept as they are, not removed, as compose leaves them.
	Keep []string
}

// MarshalJSON writes the documents under their kinds' keys: the
// workloads, then each kind's in rank order, then keep.
func (d Documents) MarshalJSON() ([]byte, error) {
	var o object
	if len(d.Workloads) > 0 {
		o.add("workloads", d.Workloads)
	}
	for _, doc := range d.Docs {
		if _, ok := spec.DocKindOf(doc.DocKind()); !ok {
			return nil, fmt.Errorf("no document kind %q", doc.DocKind())
		}
	}
	for _, k := range spec.DocKinds() {
		var of []spec.Document
		for _, doc := range d.Docs {
			if doc.DocKind() == k.Name {
				of = append(of, doc)
			}
		}
		if len(of) > 0 {
			o.add(k.Plural, of)
		}
	}
	if len(d.Keep) > 0 {
		o.add("keep", d.Keep)
	}
	return o.json()
}

// object is a JSON object written key by key, in the order they are added.
type object struct {
	keys []string
	vals []any
}

func (o *object) add(key string, v any) {
	o.keys = append(o.keys, key)
	o.vals = append(o.vals, v)
}

func (o *object) json() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range o.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		vb, err := json.Marshal(o.vals[i])
		if err != nil {
			return nil, err
		}
		b.Write(kb)
		b.WriteByte(':')
		b.Write(vb)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// UnmarshalJSON reads the documents as strictly as a workload is read
// alone: a key of no kind, or a document of its kind that does not decode
// or is not valid, is refused, saying where (networks[2].name).
func (d *Documents) UnmarshalJSON(b []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	*d = Documents{}
	for _, key := range slices.Sorted(maps.Keys(m)) {
		raw := m[key]
		if key == "keep" {
			if err := json.Unmarshal(raw, &d.Keep); err != nil {
				return fmt.Errorf("keep: %w", err)
			}
			continue
		}
		var kind string
		if key != "workloads" {
			k, ok := docKindOfPlural(key)
			if !ok {
				return fmt.Errorf("json: unknown field %q", key)
			}
			kind = k.Name
		}
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		for i, item := range items {
			if kind == "" {
				w, err := spec.DecodeJSON(bytes.NewReader(item))
				if err != nil {
					return inList(key, i, err)
				}
				d.Workloads = append(d.Workloads, w)
				continue
			}
			doc, err := spec.DecodeDocumentJSON(kind, bytes.NewReader(item))
			if err != nil {
				return inList(key, i, err)
			}
			d.Docs = append(d.Docs, doc)
		}
	}
	return nil
}

// inList points a document's error at its place in its list.
func inList(key string, i int, err error) error {
	var fe *spec.FieldError
	if errors.As(err, &fe) {
		return &spec.FieldError{Field: fmt.Sprintf("%s[%d].%s", key, i, fe.Field), Msg: fe.Msg}
	}
	return fmt.Errorf("%s[%d]: %w", key, i, err)
}

// docKindOfPlural is the kind whose plural is p.
func docKindOfPlural(p string) (spec.DocKind, bool) {
	for _, k := range spec.DocKinds() {
		if k.Plural == p {
			return k, true
		}
	}
	return spec.DocKind{}, false
}

// ProjectChange is what an up or a down did to a project: the outcome of
// each workload applied and removed, the documents removed by kind, and
// the named volumes removed (down --volumes), by full name
// (PROJECT.NAME). On the wire the documents removed of each kind are under
// the kind's plural ("networks", "policies", "workspaces").
type ProjectChange struct {
	Applied []Result
	Removed []Result
	// Docs are the documents removed: kind ("network") → full names.
	Docs    map[string][]string
	Volumes []string
	// Error is what failed of the change as a whole, after what it did.
	Error *Error
}

// MarshalJSON writes the change with the documents removed under their
// kinds' keys, in the reverse of their rank (the order they went).
func (c ProjectChange) MarshalJSON() ([]byte, error) {
	var o object
	o.add("applied", c.Applied)
	o.add("removed", c.Removed)
	for kind := range c.Docs {
		if _, ok := spec.DocKindOf(kind); !ok {
			return nil, fmt.Errorf("no document kind %q", kind)
		}
	}
	kinds := spec.DocKinds()
	slices.Reverse(kinds)
	for _, k := range kinds {
		if names := c.Docs[k.Name]; len(names) > 0 {
			o.add(k.Plural, names)
		}
	}
	if len(c.Volumes) > 0 {
		o.add("volumes", c.Volumes)
	}
	if c.Error != nil {
		o.add("error", c.Error)
	}
	return o.json()
}

// UnmarshalJSON reads a change as MarshalJSON writes it; a key of a kind
// this client does not know is left out.
func (c *ProjectChange) UnmarshalJSON(b []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	*c = ProjectChange{}
	fields := map[string]any{"applied": &c.Applied, "removed": &c.Removed, "volumes": &c.Volumes, "error": &c.Error}
	for key, raw := range m {
		if f, ok := fields[key]; ok {
			if err := json.Unmarshal(raw, f); err != nil {
				return fmt.Errorf("%s: %w", key, err)
			}
			continue
		}
		k, ok := docKindOfPlural(key)
		if !ok {
			continue
		}
		var names []string
		if err := json.Unmarshal(raw, &names); err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		if c.Docs == nil {
			c.Docs = map[string][]string{}
		}
		c.Docs[k.Name] = names
	}
	return nil
}

// Err is the change's error, nil when all of it was done.
func (c *ProjectChange) Err() error {
	if c == nil || c.Error == nil {
		return nil
	}
	return c.Error
}

// Up makes a project what docs say: what the project has and docs do not
// is removed. The change's own failure, after what it did, is its Err.
func (c *Client) Up(ctx context.Context, project string, docs Documents, o ApplyOptions) (*ProjectChange, error) {
	var out ProjectChange
	if err := c.do(ctx, "PUT", "/v1/projects/"+url.PathEscape(project), applyQuery(o), docs, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Down removes everything of a project.
func (c *Client) Down(ctx context.Context, project string, o RemoveOptions) (*ProjectChange, error) {
	q := url.Values{}
	if o.Force {
		q.Set("force", "true")
	}
	if o.Volumes {
		q.Set("volumes", "true")
	}
	var out ProjectChange
	if err := c.do(ctx, "DELETE", "/v1/projects/"+url.PathEscape(project), q, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// leaseQuery is o on the wire.
func leaseQuery(o LeaseOptions) url.Values {
	q := url.Values{}
	if o.Grace > 0 {
		q.Set("grace", o.Grace.String())
	}
	if o.TTL > 0 {
		q.Set("ttl", o.TTL.String())
	}
	if o.Volumes {
		q.Set("volumes", "true")
	}
	return q
}

// ParseLeaseOptions reads LeaseOptions from a request's query.
func ParseLeaseOptions(q url.Values) (LeaseOptions, error) {
	var o LeaseOptions
	for _, f := range []struct {
		key string
		d   *time.Duration
	}{{"grace", &o.Grace}, {"ttl", &o.TTL}} {
		if v := q.Get(f.key); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 {
				return o, fmt.Errorf("%w: %s: not a duration: %q", errdefs.ErrInvalid, f.key, v)
			}
			*f.d = d
		}
	}
	o.Volumes = q.Get("volumes") == "true"
	return o, nil
}

// Hold binds project to this client until release: if the client goes
// (its process killed, its connection closed) and is not back within the
// grace, the daemon takes the project down. Hold returns once the daemon
// has recorded the binding; the hold then follows the daemon across its
// restarts, connecting again until release. The project need not exist
// yet: hold it before the up, and an up cut short leaves nothing.
func (c *Client) Hold(ctx context.Context, project string, o LeaseOptions) (release func(), err error) {
	path := "/v1/projects/" + url.PathEscape(project) + "/hold"
	q := leaseQuery(o)
	hctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	open := func(ctx context.Context) (io.Closer, *bufio.Reader, error) {
		resp, err := c.send(ctx, "POST", path, q, nil)
		if err != nil {
			return nil, nil, err
		}
		br := bufio.NewReader(resp.body)
		if _, err := br.ReadBytes('\n'); err != nil {
			resp.body.Close()
			return nil, nil, fmt.Errorf("holding project %s: %w", project, err)
		}
		return resp.body, br, nil
	}
	// The first connection is given up with ctx; once held, the hold is
	// release's to end.
	octx, ocancel := context.WithCancel(hctx)
	stop := context.AfterFunc(ctx, ocancel)
	body, br, err := open(octx)
	stop()
	if err != nil {
		cancel()
		return nil, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			// Nothing more comes until the daemon goes away.
			_, _ = io.Copy(io.Discard, br)
			body.Close()
			for wait := 50 * time.Millisecond; ; wait = min(2*wait, time.Second) {
				select {
				case <-hctx.Done():
					return
				case <-time.After(wait):
				}
				body, br, err = open(hctx)
				var answered *Error
				switch {
				case err == nil:
				case errors.As(err, &answered):
					return // refused: the project is going, or bound to another
				default:
					continue // no daemon yet
				}
				break
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			<-done
		})
	}, nil
}

// Lease binds project to this client's user until o.TTL from now (the
// project goes then unless the lease is renewed), or with no TTL ends the
// binding and leaves the project up.
func (c *Client) Lease(ctx context.Context, project string, o LeaseOptions) error {
	return c.do(ctx, "PUT", "/v1/projects/"+url.PathEscape(project)+"/lease", leaseQuery(o), nil, nil)
}

// Leases lists the projects bound to clients.
func (c *Client) Leases(ctx context.Context) ([]Lease, error) {
	var out []Lease
	return out, c.do(ctx, "GET", "/v1/leases", nil, nil, &out)
}

// DownStale takes down every project whose client is gone (its lease held
// by no one and not running to a time to come), now rather than at the
// end of its grace, and answers each one's change by project.
func (c *Client) DownStale(ctx context.Context) (map[string]*ProjectChange, error) {
	out := map[string]*ProjectChange{}
	return out, c.do(ctx, "DELETE", "/v1/projects", url.Values{"stale": {"true"}}, nil, &out)
}
