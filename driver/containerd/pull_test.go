package containerd

import (
	"context"
	"strings"
	"testing"

	"github.com/flyd-dev/flyd/driver/containerd/ctrtest"
	"github.com/flyd-dev/flyd/internal/testenv"
	"github.com/flyd-dev/flyd/spec"
)

// serveRegistry serves the test's busybox image on loopback as
// bbox:latest, until the test ends.
func serveRegistry(t *testing.T, opts ...ctrtest.RegistryOption) *ctrtest.Registry {
	t.Helper()
	r, err := ctrtest.ServeRegistry(archive, []string{"bbox"}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// TestPullFromRegistry: an image containerd's store does not have is
// pulled from its registry (one on loopback, served by the test) before
// the container starts, said as preparing; the next start finds it in
// the store and asks the registry nothing. An image the registry does
// not have fails the start with the registry's answer.
func TestPullFromRegistry(t *testing.T) {
	d := setup(t)
	if skipReason != "" {
		testenv.Skip(t, skipReason)
	}
	reg := serveRegistry(t)
	ref := reg.Addr + "/bbox:latest"
	ctx := context.Background()
	c, err := d.conn()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.ImageService().Delete(d.ctx(context.Background()), ref) })

	start := func(name string) ([]string, error) {
		var prep []string
		tk := task(t, name, "sh", "-c", "echo pulled-and-ran")
		tk.Spec = &spec.Workload{Name: name, Kind: spec.KindContainerd, Containerd: &spec.Containerd{Image: strings.Replace(ref, "bbox", name, 1)}}
		if name == "first" || name == "again" {
			tk.Spec.Containerd.Image = ref
		}
		tk.Preparing = func(s string) { prep = append(prep, s) }
		p, err := d.Start(ctx, tk)
		if err != nil {
			return prep, err
		}
		waitLog(t, tk, "pulled-and-ran")
		if e := waitDone(t, p); e.Code != 0 {
			t.Errorf("%s: exit %+v", name, e)
		}
		return prep, nil
	}

	prep, err := start("first")
	if err != nil {
		t.Fatal(err)
	}
	if len(prep) != 1 || prep[0] != "pulling "+ref {
		t.Errorf("preparing: %q, want pulling %s", prep, ref)
	}
	// The layers may be in the content store already (an earlier test
	// imported the same image): the manifest is asked for all the same,
	// and the image is in the store under its reference.
	asked := len(reg.Asked())
	if asked == 0 {
		t.Fatal("the registry was asked nothing")
	}
	if _, err := c.GetImage(d.ctx(ctx), ref); err != nil {
		t.Fatalf("the pulled image is not in the store: %v", err)
	}

	prep, err = start("again")
	if err != nil {
		t.Fatal(err)
	}
	again := reg.Asked()[asked:]
	if len(prep) != 0 || len(again) != 0 {
		t.Errorf("second start: preparing %q, the registry asked %q: want the image from the store", prep, again)
	}

	if _, err := start("missing"); err == nil || !strings.Contains(err.Error(), "pulling it failed") || !strings.Contains(err.Error(), "not found") {
		t.Errorf("an image the registry does not have: %v", err)
	}
	if l := leftovers(t, d); len(l) > 0 {
		t.Fatalf("left behind: %v", l)
	}
}
