package containerd

import (
	"archive/tar"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/flyd-dev/flyd/internal/testenv"
	"github.com/flyd-dev/flyd/spec"
)

// registry is an OCI distribution registry on loopback that serves one
// repository, bbox, with the test's busybox image as its tag latest, and
// counts what it is asked for.
type registry struct {
	addr  string
	mu    sync.Mutex
	asked []string
}

func serveRegistry(t *testing.T) *registry {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	files := map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = b
	}
	var index struct {
		Manifests []struct {
			MediaType string `json:"mediaType"`
			Digest    string `json:"digest"`
		} `json:"manifests"`
	}
	if err := json.Unmarshal(files["index.json"], &index); err != nil || len(index.Manifests) != 1 {
		t.Fatalf("index.json: %v", err)
	}
	manifest := index.Manifests[0]
	blob := func(digest string) ([]byte, bool) {
		b, ok := files["blobs/sha256/"+strings.TrimPrefix(digest, "sha256:")]
		return b, ok && strings.HasPrefix(digest, "sha256:")
	}
	r := &registry{}
	mux := http.NewServeMux()
	mux.HandleFunc("/v2/", func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.asked = append(r.asked, req.Method+" "+req.URL.Path)
		r.mu.Unlock()
		path := strings.TrimPrefix(req.URL.Path, "/v2/")
		switch {
		case path == "":
			w.WriteHeader(http.StatusOK)
		case strings.HasPrefix(path, "bbox/manifests/"):
			ref := strings.TrimPrefix(path, "bbox/manifests/")
			if ref != "latest" && ref != manifest.Digest {
				http.Error(w, `{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown"}]}`, http.StatusNotFound)
				return
			}
			b, _ := blob(manifest.Digest)
			w.Header().Set("Content-Type", manifest.MediaType)
			w.Header().Set("Docker-Content-Digest", manifest.Digest)
			w.Header().Set("Content-Length", strconv.Itoa(len(b)))
			if req.Method != http.MethodHead {
				_, _ = w.Write(b)
			}
		case strings.HasPrefix(path, "bbox/blobs/"):
			b, ok := blob(strings.TrimPrefix(path, "bbox/blobs/"))
			if !ok {
				http.Error(w, `{"errors":[{"code":"BLOB_UNKNOWN"}]}`, http.StatusNotFound)
				return
			}
			w.Header().Set("Content-Length", strconv.Itoa(len(b)))
			if req.Method != http.MethodHead {
				_, _ = w.Write(b)
			}
		default:
			http.Error(w, `{"errors":[{"code":"NAME_UNKNOWN","message":"repository name not known to registry"}]}`, http.StatusNotFound)
		}
	})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	r.addr = l.Addr().String()
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
	ref := reg.addr + "/bbox:latest"
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
	reg.mu.Lock()
	asked := len(reg.asked)
	reg.mu.Unlock()
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
	reg.mu.Lock()
	again := reg.asked[asked:]
	reg.mu.Unlock()
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
