package registryclient_test

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flyd-dev/flyd/registryclient"
)

// Every method against the reference registry, in a registrant's order.
func TestClientAgainstRegistry(t *testing.T) {
	r := newRealRegistry(t)
	c, ctx := r.c, context.Background()
	in := registryclient.Instance{
		Name: "voice", Address: "10.0.0.7", Port: 8443, Protocol: "tcp",
		Tags:     []string{"api=http", "jet.domain=voice.koder.dev"},
		Metadata: map[string]string{"flyd.workload": "voice", "container": "voice-1"},
		Weight:   50, Priority: 5, Healthy: true, TTL: int64(30 * time.Second),
		RegisteredAt: time.Unix(1, 0), // ignored by the registry
	}
	id, created, err := c.Register(ctx, in)
	if err != nil || id != "voice-10.0.0.7-8443" || !created {
		t.Fatalf("Register: %q created %v, %v", id, created, err)
	}
	if _, created, err := c.Register(ctx, in); err != nil || created {
		t.Fatalf("Register again (R2 upsert): created %v, %v", created, err)
	}
	sick := registryclient.Instance{ID: "db-1", Name: "db", Address: "10.0.0.9", Port: 5432}
	if _, _, err := c.Register(ctx, sick); err != nil {
		t.Fatal(err)
	}

	r.clk.Add(10 * time.Second)
	if err := c.Heartbeat(ctx, id); err != nil {
		t.Fatalf("Heartbeat: %v", err)
	}
	names, err := c.Names(ctx)
	if err != nil || !slices.Equal(names, []string{"db", "voice"}) {
		t.Fatalf("Names: %v, %v", names, err)
	}
	all, err := c.Instances(ctx, false)
	if err != nil || len(all) != 2 {
		t.Fatalf("Instances: %+v, %v", all, err)
	}
	got := all[1]
	want := in
	want.ID = id
	want.RegisteredAt = r.clk.Now().Add(-10 * time.Second)
	want.UpdatedAt = r.clk.Now()
	if !got.RegisteredAt.Equal(want.RegisteredAt) || !got.UpdatedAt.Equal(want.UpdatedAt) {
		t.Fatalf("stamps: registered %v updated %v", got.RegisteredAt, got.UpdatedAt)
	}
	got.RegisteredAt, got.UpdatedAt = want.RegisteredAt, want.UpdatedAt
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, want)
	}
	healthy, err := c.Instances(ctx, true)
	if err != nil || len(healthy) != 1 || healthy[0].ID != id {
		t.Fatalf("Instances(healthy only): %+v, %v", healthy, err)
	}
	export, err := c.Export(ctx)
	if err != nil || !strings.Contains(export, `domain = "voice.koder.dev"`) || !strings.Contains(export, "[[service]]") {
		t.Fatalf("Export: %v\n%s", err, export)
	}

	if err := c.Deregister(ctx, id); err != nil {
		t.Fatalf("Deregister: %v", err)
	}
	if err := c.Deregister(ctx, id); !errors.Is(err, registryclient.ErrNotFound) {
		t.Fatalf("Deregister again: %v; want ErrNotFound", err)
	}
	if err := c.Heartbeat(ctx, id); !errors.Is(err, registryclient.ErrGone) {
		t.Fatalf("Heartbeat after Deregister: %v; want ErrGone", err)
	}
	r.clk.Add(time.Hour)
	if err := c.Heartbeat(ctx, "db-1"); !errors.Is(err, registryclient.ErrGone) {
		t.Fatalf("Heartbeat after expiry: %v; want ErrGone", err)
	}
	if names, err := c.Names(ctx); err != nil || len(names) != 0 || names == nil {
		t.Fatalf("Names of an empty registry: %#v, %v", names, err)
	}
}

// The reference registry's refusals map to the sentinels.
func TestClientSentinelsFromRegistry(t *testing.T) {
	r := newRealRegistry(t)
	ctx := context.Background()
	_, _, err := r.c.Register(ctx, registryclient.Instance{Name: "x", Address: "h"})
	if !errors.Is(err, registryclient.ErrBadRequest) || !strings.Contains(err.Error(), "port") {
		t.Fatalf("Register without a port: %v; want ErrBadRequest naming the port", err)
	}
	var se *registryclient.StatusError
	if !errors.As(err, &se) || se.StatusCode != 400 {
		t.Fatalf("not a *StatusError with 400: %#v", err)
	}

	wrong, _ := keyFile(t) // another random key
	c, err := registryclient.New(r.srv.URL, wrong)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	calls := map[string]func() error{
		"register": func() error {
			_, _, err := c.Register(ctx, registryclient.Instance{Name: "x", Address: "h", Port: 1})
			return err
		},
		"heartbeat":  func() error { return c.Heartbeat(ctx, "x") },
		"deregister": func() error { return c.Deregister(ctx, "x") },
		"names":      func() error { _, err := c.Names(ctx); return err },
		"instances":  func() error { _, err := c.Instances(ctx, true); return err },
		"export":     func() error { _, err := c.Export(ctx); return err },
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			err := call()
			if !errors.Is(err, registryclient.ErrUnauthorized) {
				t.Fatalf("with a wrong key: %v; want ErrUnauthorized", err)
			}
			noKey(t, err, r.key)
		})
	}
}

func TestNewRefuses(t *testing.T) {
	good, key := keyFile(t)
	tests := []struct {
		name, url, msg string
		opts           []registryclient.Option
	}{
		{"scheme", "ftp://h:1", "scheme", nil},
		{"no host", "http://", "no host", nil},
		{"credentials in the URL", "http://user:" + key + "@h:1", "credentials", nil},
		{"query", "http://h:1/?key=" + key, "no query", nil},
		{"not a URL", "http://h:1/%zz", "registry URL", nil},
		{"zero timeout", "http://h:1", "positive", []registryclient.Option{registryclient.WithTimeout(0)}},
		{"zero conns", "http://h:1", "positive", []registryclient.Option{registryclient.WithMaxConns(0)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := registryclient.New(tt.url, good, tt.opts...)
			if err == nil || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("%v; want an error saying %q", err, tt.msg)
			}
			noKey(t, err, key)
		})
	}
	c, err := registryclient.New("http://127.0.0.1:9471/", good)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
}
