package ctrtest

import (
	"archive/tar"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
)

// Registry is an OCI distribution registry on loopback that serves the
// image of an archive BusyboxArchive wrote, as the tag latest of every
// repository in Repos, and records what it is asked for.
type Registry struct {
	// Addr is host:port, on 127.0.0.1.
	Addr string
	// Repos are the repositories it serves.
	Repos []string

	user, password string
	srv            *http.Server
	mu             sync.Mutex
	asked          []string
	authorized     []string
}

// RegistryOption changes what a Registry asks of its clients.
type RegistryOption func(*Registry)

// WithBasicAuth makes the registry answer 401 with a Basic challenge to
// any request without these credentials.
func WithBasicAuth(user, password string) RegistryOption {
	return func(r *Registry) { r.user, r.password = user, password }
}

// ServeRegistry serves the archive's image under each of repos (bbox when
// none is given) until Close.
func ServeRegistry(archive string, repos []string, opts ...RegistryOption) (*Registry, error) {
	if len(repos) == 0 {
		repos = []string{"bbox"}
	}
	files, err := readTar(archive)
	if err != nil {
		return nil, err
	}
	var index struct {
		Manifests []struct {
			MediaType string `json:"mediaType"`
			Digest    string `json:"digest"`
		} `json:"manifests"`
	}
	if err := json.Unmarshal(files["index.json"], &index); err != nil || len(index.Manifests) != 1 {
		return nil, fmt.Errorf("%s: index.json: want one manifest: %v", archive, err)
	}
	manifest := index.Manifests[0]
	blob := func(digest string) ([]byte, bool) {
		b, ok := files["blobs/sha256/"+strings.TrimPrefix(digest, "sha256:")]
		return b, ok && strings.HasPrefix(digest, "sha256:")
	}
	r := &Registry{Repos: repos}
	for _, o := range opts {
		o(r)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/v2/", func(w http.ResponseWriter, req *http.Request) {
		if !r.allowed(w, req) {
			return
		}
		r.mu.Lock()
		r.asked = append(r.asked, req.Method+" "+req.URL.Path)
		r.mu.Unlock()
		path := strings.TrimPrefix(req.URL.Path, "/v2/")
		if path == "" {
			w.WriteHeader(http.StatusOK)
			return
		}
		repo, kind, ref := "", "", ""
		for _, k := range []string{"/manifests/", "/blobs/"} {
			if i := strings.LastIndex(path, k); i > 0 {
				repo, kind, ref = path[:i], strings.Trim(k, "/"), path[i+len(k):]
				break
			}
		}
		known := false
		for _, rp := range r.Repos {
			known = known || rp == repo
		}
		switch {
		case !known:
			http.Error(w, `{"errors":[{"code":"NAME_UNKNOWN","message":"repository name not known to registry"}]}`, http.StatusNotFound)
		case kind == "manifests":
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
		default:
			b, ok := blob(ref)
			if !ok {
				http.Error(w, `{"errors":[{"code":"BLOB_UNKNOWN"}]}`, http.StatusNotFound)
				return
			}
			w.Header().Set("Content-Length", strconv.Itoa(len(b)))
			if req.Method != http.MethodHead {
				_, _ = w.Write(b)
			}
		}
	})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r.srv = &http.Server{Handler: mux}
	go func() { _ = r.srv.Serve(l) }()
	r.Addr = l.Addr().String()
	return r, nil
}

// allowed says whether req carries the registry's credentials, and
// answers the challenge when it does not.
func (r *Registry) allowed(w http.ResponseWriter, req *http.Request) bool {
	if r.user == "" {
		return true
	}
	u, p, ok := req.BasicAuth()
	if ok && subtle.ConstantTimeCompare([]byte(u), []byte(r.user)) == 1 && subtle.ConstantTimeCompare([]byte(p), []byte(r.password)) == 1 {
		r.mu.Lock()
		r.authorized = append(r.authorized, req.Method+" "+req.URL.Path)
		r.mu.Unlock()
		return true
	}
	r.mu.Lock()
	r.asked = append(r.asked, "401 "+req.Method+" "+req.URL.Path)
	r.mu.Unlock()
	w.Header().Set("WWW-Authenticate", `Basic realm="ctrtest"`)
	http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`, http.StatusUnauthorized)
	return false
}

// Asked is every request so far, "METHOD PATH" (a refused one "401 METHOD
// PATH"), in order.
func (r *Registry) Asked() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.asked...)
}

// Authorized is every request that carried the registry's credentials.
func (r *Registry) Authorized() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.authorized...)
}

// Close stops serving.
func (r *Registry) Close() error { return r.srv.Close() }

func readTar(path string) (map[string][]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	files := map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		files[h.Name] = b
	}
}
