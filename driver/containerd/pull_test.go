package containerd

import (
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"regexp"
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

// progressDone is a pull's progress once every layer is fetched.
var progressDone = regexp.MustCompile(`: (\d+)/(\d+) layers, ([0-9.]+ [kMGT]?B) of ([0-9.]+ [kMGT]?B)$`)

// fetchedAll says whether a pull's progress has every layer and byte.
func fetchedAll(s string) bool {
	m := progressDone.FindStringSubmatch(s)
	return m != nil && m[1] == m[2] && m[3] == m[4] && m[1] != "0"
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
	if len(prep) < 2 || prep[0] != "pulling "+ref || !fetchedAll(prep[len(prep)-1]) || !strings.HasPrefix(prep[len(prep)-1], "pulling "+ref+": ") {
		t.Errorf("preparing: %q, want pulling %s, then its layers and bytes, all fetched", prep, ref)
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

// TestPullWithCredentials: a registry that asks for basic auth is pulled
// from with the credentials of the ~/.docker/config.json of the caller
// who applied the workload; without them, or with a file the daemon must
// not trust (another's, or reached by a symlink out of the home), the
// pull fails saying why, and no error holds the secret.
func TestPullWithCredentials(t *testing.T) {
	d := setup(t)
	if skipReason != "" {
		testenv.Skip(t, skipReason)
	}
	const user, password = "shopper", "s3cret-pass"
	reg := serveRegistry(t, ctrtest.WithBasicAuth(user, password))
	reg.Repos = []string{"bbox"}
	ctx := context.Background()
	c, err := d.conn()
	if err != nil {
		t.Fatal(err)
	}
	ref := reg.Addr + "/bbox:latest"
	t.Cleanup(func() { _ = c.ImageService().Delete(d.ctx(context.Background()), ref) })

	// The caller is uid 4242, whose home is the test's.
	const caller = 4242
	home := t.TempDir()
	if err := os.Chown(home, caller, caller); err != nil {
		t.Fatal(err)
	}
	was := homeOf
	homeOf = func(uid uint32) string {
		if uid == caller {
			return home
		}
		return ""
	}
	t.Cleanup(func() { homeOf = was })
	d.SetCallerOf(func(string) (uint32, bool) { return caller, true })
	t.Cleanup(func() { d.callerOf.Store(nil) })
	auth := base64.StdEncoding.EncodeToString([]byte(user + ":" + password))
	writeConfig := func(dir string, owner int, body string) {
		t.Helper()
		_ = os.RemoveAll(filepath.Join(home, ".docker"))
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		f := filepath.Join(dir, "config.json")
		if err := os.WriteFile(f, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(f, owner, owner); err != nil {
			t.Fatal(err)
		}
	}
	good := `{"auths": {"` + reg.Addr + `": {"auth": "` + auth + `"}}}`
	pull := func() error {
		tk := task(t, "private", "true")
		tk.Spec = &spec.Workload{Name: "private", Kind: spec.KindContainerd, Containerd: &spec.Containerd{Image: ref}}
		p, err := d.Start(ctx, tk)
		if err != nil {
			if strings.Contains(err.Error(), password) || strings.Contains(err.Error(), auth) {
				t.Errorf("an error holds the secret: %v", err)
			}
			return err
		}
		waitDone(t, p)
		return nil
	}

	for _, c := range []struct {
		name, want string
		write      func()
	}{
		{"no config.json", "no basic auth credentials", func() { _ = os.RemoveAll(filepath.Join(home, ".docker")) }},
		{"another's file", "owned by uid 0, not by uid 4242", func() { writeConfig(filepath.Join(home, ".docker"), 0, good) }},
		{"a symlink out of the home", "leads out of the home directory", func() {
			outside := filepath.Join(t.TempDir(), "docker")
			writeConfig(outside, caller, good)
			if err := os.Symlink(outside, filepath.Join(home, ".docker")); err != nil {
				t.Fatal(err)
			}
		}},
		{"a wrong password", "401 Unauthorized", func() {
			writeConfig(filepath.Join(home, ".docker"), caller, `{"auths": {"http://`+reg.Addr+`/v2/": {"username": "shopper", "password": "wrong-`+password+`"}}}`)
		}},
	} {
		c.write()
		if err := pull(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want it refused, saying %q", c.name, err, c.want)
		}
	}
	if got := reg.Authorized(); len(got) != 0 {
		t.Fatalf("the registry let through %q before the right credentials", got)
	}

	writeConfig(filepath.Join(home, ".docker"), caller, good)
	if err := pull(); err != nil {
		t.Fatalf("with the caller's credentials: %v", err)
	}
	if len(reg.Authorized()) == 0 {
		t.Error("the registry saw no request with the credentials")
	}
	if l := leftovers(t, d); len(l) > 0 {
		t.Fatalf("left behind: %v", l)
	}
}

// TestDockerAuths: config.json's auths as docker writes them (auth in
// base64, username and password, an identity token; a host with a port,
// a URL, Docker Hub's key) are read by host.
func TestDockerAuths(t *testing.T) {
	home := t.TempDir()
	uid := uint32(os.Getuid())
	was := homeOf
	homeOf = func(uint32) string { return home }
	t.Cleanup(func() { homeOf = was })
	if err := os.Mkdir(filepath.Join(home, ".docker"), 0o700); err != nil {
		t.Fatal(err)
	}
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	body := `{"auths": {
		"127.0.0.1:5000": {"auth": "` + b64("a:pa:ss") + `"},
		"https://registry.example.com/v2/": {"username": "b", "password": "pb"},
		"https://index.docker.io/v1/": {"auth": "` + b64("hub:ph") + `"},
		"ghcr.io": {"identitytoken": "tok"},
		"empty.example.com": {}
	}, "credsStore": "desktop"}`
	if err := os.WriteFile(filepath.Join(home, ".docker", "config.json"), []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	auths, err := readDockerAuths(uid)
	if err != nil {
		t.Fatal(err)
	}
	for host, want := range map[string]dockerAuth{
		"127.0.0.1:5000":       {"a", "pa:ss"},
		"registry.example.com": {"b", "pb"},
		"registry-1.docker.io": {"hub", "ph"},
		"ghcr.io":              {"", "tok"},
	} {
		if got, ok := lookupAuth(auths, host); !ok || got != want {
			t.Errorf("%s: %+v %v, want %+v", host, got, ok, want)
		}
	}
	if _, ok := lookupAuth(auths, "empty.example.com"); ok {
		t.Error("an entry without a secret is a credential")
	}
	if err := os.WriteFile(filepath.Join(home, ".docker", "config.json"), []byte(`{"auths": {"x": {"auth": "hunter2-not-base64!"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := readDockerAuths(uid); err == nil || !strings.Contains(err.Error(), "auths.x.auth: not base64") || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("a bad auth: %v", err)
	}
	if err := os.WriteFile(filepath.Join(home, ".docker", "config.json"), []byte(`{"auths": hunter2`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := readDockerAuths(uid); err == nil || !strings.Contains(err.Error(), "not valid JSON") || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("bad JSON: %v", err)
	}
}
