package authz

import (
	"context"
	"testing"
)

func TestCallerOf(t *testing.T) {
	if c := CallerOf(context.Background()); c != (Caller{}) {
		t.Fatalf("a context without a caller is root's, got %+v", c)
	}
	want := Caller{UID: 1000, Confined: true}
	ctx := WithCaller(context.Background(), want)
	if c := CallerOf(ctx); c != want {
		t.Fatalf("CallerOf = %+v, want %+v", c, want)
	}
	if c := CallerOf(WithCaller(ctx, Caller{})); c != (Caller{}) {
		t.Fatalf("an inner WithCaller wins, got %+v", c)
	}
}
