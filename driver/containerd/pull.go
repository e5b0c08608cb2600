package containerd

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/core/remotes/docker"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/flyd-dev/flyd/driver"
)

// pullTimeout bounds a pull: a registry that does not answer must not
// keep a workload preparing forever.
const pullTimeout = 2 * time.Minute

// progressEvery is how often a pull's progress is told, when it changed.
const progressEvery = 500 * time.Millisecond

// pull fetches an image the store does not have from its registry, with
// the credentials of the caller that applied the workload when the
// registry asks for some (registryCredentials), and a plain-HTTP
// registry on loopback. preparing is told "pulling REF", then the layers
// and bytes fetched so far, on the caller's goroutine.
func (d *Driver) pull(ctx context.Context, c *containerd.Client, ref, workload string, preparing func(string)) (containerd.Image, error) {
	if preparing == nil {
		preparing = func(string) {}
	}
	preparing("pulling " + ref)
	ctx, cancel := context.WithTimeout(ctx, pullTimeout)
	defer cancel()
	resolver := docker.NewResolver(docker.ResolverOptions{
		Hosts: docker.ConfigureDefaultRegistries(
			docker.WithPlainHTTP(docker.MatchLocalhost),
			docker.WithAuthorizer(docker.NewDockerAuthorizer(docker.WithAuthCreds(d.registryCredentials(workload)))),
		),
	})
	p := &pullProgress{sizes: map[string]int64{}, done: map[string]bool{}}
	type result struct {
		img containerd.Image
		err error
	}
	res := make(chan result, 1)
	go func() {
		img, err := c.Pull(ctx, ref, containerd.WithResolver(resolver), containerd.WithImageHandlerWrapper(p.wrap))
		res <- result{img, err}
	}()
	tick := time.NewTicker(progressEvery)
	defer tick.Stop()
	told := ""
	tell := func() {
		if msg := p.text(ref); msg != "" && msg != told {
			told = msg
			preparing(msg)
		}
	}
	for {
		select {
		case r := <-res:
			if r.err != nil {
				return nil, fmt.Errorf("%w: image %q is not in containerd namespace %q, and pulling it failed: %v",
					driver.ErrExec, ref, d.ns(), r.err)
			}
			tell()
			return r.img, nil
		case <-tick.C:
			p.poll(ctx, c)
			tell()
		}
	}
}

// pullProgress counts a pull's layers and bytes: the layers its manifests
// name, those fetched, and the bytes of those still coming as containerd's
// content store has them.
type pullProgress struct {
	mu       sync.Mutex
	sizes    map[string]int64
	done     map[string]bool
	inFlight int64
}

// wrap counts, around containerd's handler, each manifest's layers and
// each layer once fetched.
func (p *pullProgress) wrap(h images.Handler) images.Handler {
	return images.HandlerFunc(func(ctx context.Context, desc ocispec.Descriptor) ([]ocispec.Descriptor, error) {
		children, err := h.Handle(ctx, desc)
		if err != nil {
			return children, err
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		if images.IsManifestType(desc.MediaType) {
			for _, ch := range children {
				if images.IsLayerType(ch.MediaType) {
					p.sizes[ch.Digest.String()] = ch.Size
				}
			}
		}
		if images.IsLayerType(desc.MediaType) {
			p.done[desc.Digest.String()] = true
		}
		return children, nil
	})
}

// poll reads how far the layers being fetched are.
func (p *pullProgress) poll(ctx context.Context, c *containerd.Client) {
	sts, err := c.ContentStore().ListStatuses(ctx)
	if err != nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var n int64
	for _, st := range sts {
		i := strings.Index(st.Ref, "sha256:")
		if i < 0 {
			continue
		}
		dg := st.Ref[i:]
		if _, ok := p.sizes[dg]; ok && !p.done[dg] {
			n += st.Offset
		}
	}
	p.inFlight = n
}

// text is "pulling REF: D/N layers, X of Y", or "" before the layers are
// known.
func (p *pullProgress) text(ref string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.sizes) == 0 {
		return ""
	}
	var total, got int64
	done := 0
	for dg, size := range p.sizes {
		total += size
		if p.done[dg] {
			done++
			got += size
		}
	}
	got = min(got+p.inFlight, total)
	return fmt.Sprintf("pulling %s: %d/%d layers, %s of %s", ref, done, len(p.sizes), byteText(got), byteText(total))
}

// byteText is n in decimal units, as docker writes sizes.
func byteText(n int64) string {
	const unit = 1000
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n)/unit, 0
	for v >= unit && i < 3 {
		v /= unit
		i++
	}
	return fmt.Sprintf("%.1f %cB", v, "kMGT"[i])
}
