package documents

import (
	"context"
	"errors"
	"fmt"

	"github.com/flyd-dev/flyd/api"
	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/netplane"
	"github.com/flyd-dev/flyd/spec"
)

// Networks is the network plane as the keeper of network documents: a
// document gives its network its settings, from its first workload on
// when the network has none yet. hostsOf, if not nil, names a network's
// /etc/hosts for its runs while one runs.
func Networks(p *netplane.Plane, hostsOf func(network string) string) Keeper {
	return networks{p, hostsOf}
}

type networks struct {
	p       *netplane.Plane
	hostsOf func(string) string
}

func (k networks) Put(ctx context.Context, doc spec.Document) (any, error) {
	n, ok := doc.(*spec.Network)
	if !ok {
		return nil, fmt.Errorf("%w: a %s document is no network", errdefs.ErrInvalid, doc.DocKind())
	}
	nw, err := k.p.PutNetwork(n)
	if nw == nil {
		return nil, err
	}
	v := api.FromNetwork(*nw)
	return &v, err
}

// Delete deletes the network, which no workload may use, and its document.
func (k networks) Delete(ctx context.Context, name string) error { return k.p.DeleteNetwork(name) }

func (k networks) Forget(ctx context.Context, name string) error { return k.p.ForgetNetwork(name) }

// List is the isolated networks, and the documents of networks that have
// no namespace.
func (k networks) List(ctx context.Context) (any, error) {
	ns, err := k.p.Networks()
	if err != nil {
		return nil, err
	}
	out := make([]api.Network, len(ns))
	for i, n := range ns {
		out[i] = api.FromNetwork(n)
		if k.hostsOf != nil {
			out[i].Hosts = k.hostsOf(n.Name)
		}
	}
	return out, nil
}

func (k networks) Names(ctx context.Context) (map[string][]string, error) {
	ns, err := k.p.Networks()
	if err != nil {
		return nil, err
	}
	out := make(map[string][]string, len(ns))
	for _, n := range ns {
		out[n.Name] = n.Workloads
	}
	return out, nil
}

func (k networks) Exists(name string) bool { return k.p.Doc(name) != nil }

// Describe says a network's settings in the event that tells its put.
func (k networks) Describe(doc spec.Document) string {
	n, ok := doc.(*spec.Network)
	if !ok {
		return ""
	}
	return fmt.Sprintf("egress %v, peers %v", n.AllowsEgress(), n.Peers)
}

// Policies is the network plane as the keeper of policies: a policy is
// answered once its rules are in the kernel.
func Policies(p *netplane.Plane) Keeper { return policies{p} }

type policies struct{ p *netplane.Plane }

func (k policies) Put(ctx context.Context, doc spec.Document) (any, error) {
	pl, ok := doc.(*spec.Policy)
	if !ok {
		return nil, fmt.Errorf("%w: a %s document is no policy", errdefs.ErrInvalid, doc.DocKind())
	}
	if err := k.p.SetPolicy(pl.Name, pl); err != nil {
		return nil, err
	}
	for _, v := range k.p.Policies() {
		if v.Name == pl.Name {
			out := api.FromPolicy(v)
			return &out, nil
		}
	}
	return nil, fmt.Errorf("%w: policy %s removed meanwhile", errdefs.ErrNotFound, pl.Name)
}

func (k policies) Delete(ctx context.Context, name string) error { return k.p.SetPolicy(name, nil) }

func (k policies) Forget(ctx context.Context, name string) error {
	if err := k.p.SetPolicy(name, nil); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		return err
	}
	return nil
}

// List is the policy documents and what each is in force for.
func (k policies) List(ctx context.Context) (any, error) {
	ps := k.p.Policies()
	out := make([]api.Policy, len(ps))
	for i, p := range ps {
		out[i] = api.FromPolicy(p)
	}
	return out, nil
}

func (k policies) Names(ctx context.Context) (map[string][]string, error) {
	out := map[string][]string{}
	for _, p := range k.p.Policies() {
		out[p.Name] = nil
	}
	return out, nil
}

func (k policies) Exists(name string) bool { return k.p.HasPolicy(name) }
