package authz

import "context"

type callerKey struct{}

// WithCaller is ctx carrying c as who asks for what is done with it. The
// API's server says so for each request; a context that carries no caller
// is root's (the workloads directory, the daemon itself).
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// CallerOf is who asks for what is done with ctx: the caller WithCaller
// put in it, or root.
func CallerOf(ctx context.Context) Caller {
	c, _ := ctx.Value(callerKey{}).(Caller)
	return c
}
