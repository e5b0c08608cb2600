package containerd

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// SetCallerOf tells the driver whose workload a workload is: the uid of
// the caller that applied it, whose ~/.docker/config.json gives the
// credentials of the registries its image is pulled from. Until it is
// set, or when it knows no caller, a pull asks anonymously.
func (d *Driver) SetCallerOf(f func(workload string) (uid uint32, ok bool)) {
	d.callerOf.Store(&f)
}

// dockerConfig is where a user's docker keeps its credentials, under the
// user's home.
const dockerConfig = ".docker/config.json"

// maxDockerConfig bounds what is read of it.
const maxDockerConfig = 1 << 20

// registryCredentials gives the credentials of a registry host for a
// pull of workload's image, from the ~/.docker/config.json of the caller
// that applied it. The file is read at the registry's first challenge,
// once a pull: a pull from a registry that asks for none reads nothing.
// A file that cannot be trusted fails the pull, naming the file and why,
// never a secret.
func (d *Driver) registryCredentials(workload string) func(host string) (string, string, error) {
	var once sync.Once
	var auths map[string]dockerAuth
	var readErr error
	return func(host string) (string, string, error) {
		once.Do(func() {
			f := d.callerOf.Load()
			if f == nil {
				return
			}
			uid, ok := (*f)(workload)
			if !ok {
				return
			}
			auths, readErr = readDockerAuths(uid)
		})
		if readErr != nil {
			return "", "", readErr
		}
		a, ok := lookupAuth(auths, host)
		if !ok {
			return "", "", nil
		}
		return a.user, a.secret, nil
	}
}

// dockerAuth is one registry's entry: a user and password, or (user
// empty) an identity token.
type dockerAuth struct {
	user, secret string
}

// homeOf is uid's home directory, as the password database says; "" for
// none.
var homeOf = func(uid uint32) string {
	u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10))
	if err != nil {
		return ""
	}
	return u.HomeDir
}

// readDockerAuths reads the auths of uid's ~/.docker/config.json. The
// daemon reads it as root on the user's behalf, so: no symlink is
// followed out of the home directory (nor through /proc's magic links),
// the file must be a regular file owned by uid and at most 1 MiB, and a
// missing file is no credentials. Credential helpers (credsStore,
// credHelpers) are not run: they are the user's programs, and the daemon
// runs none of them as root.
func readDockerAuths(uid uint32) (map[string]dockerAuth, error) {
	home := homeOf(uid)
	if home == "" {
		return nil, nil
	}
	path := filepath.Join(home, dockerConfig)
	refuse := func(format string, args ...any) error {
		return fmt.Errorf("registry credentials: %s: %s", path, fmt.Sprintf(format, args...))
	}
	f, err := openBeneath(home, dockerConfig)
	switch {
	case errors.Is(err, unix.ENOENT):
		return nil, nil
	case errors.Is(err, unix.EXDEV) || errors.Is(err, unix.ELOOP):
		return nil, refuse("a symlink on its way leads out of the home directory: not read")
	case err != nil:
		return nil, refuse("%v", err)
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return nil, refuse("%v", err)
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return nil, refuse("not a regular file: not read")
	case st.Uid != uid:
		return nil, refuse("owned by uid %d, not by uid %d who applied the workload: not read", st.Uid, uid)
	case st.Size > maxDockerConfig:
		return nil, refuse("larger than %d bytes: not read", maxDockerConfig)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxDockerConfig+1))
	if err != nil {
		return nil, refuse("%v", err)
	}
	var cfg struct {
		Auths map[string]struct {
			Auth          string `json:"auth"`
			Username      string `json:"username"`
			Password      string `json:"password"`
			IdentityToken string `json:"identitytoken"`
		} `json:"auths"`
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		// The decoder's message may quote the file; a secret must not
		// reach an error.
		return nil, refuse("not valid JSON")
	}
	out := map[string]dockerAuth{}
	for key, e := range cfg.Auths {
		a := dockerAuth{user: e.Username, secret: e.Password}
		if e.Auth != "" {
			raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(e.Auth))
			if err != nil {
				return nil, refuse("auths.%s.auth: not base64", key)
			}
			u, p, ok := strings.Cut(string(raw), ":")
			if !ok {
				return nil, refuse("auths.%s.auth: not USER:PASSWORD in base64", key)
			}
			a = dockerAuth{user: u, secret: p}
		}
		if e.IdentityToken != "" {
			a = dockerAuth{secret: e.IdentityToken}
		}
		if a.secret == "" {
			continue
		}
		out[registryHost(key)] = a
	}
	return out, nil
}

// openBeneath opens name under dir without leaving it: openat2 with
// RESOLVE_BENEATH (a symlink is followed only while it stays under dir),
// or, on a kernel without openat2, with no symlink followed at all.
func openBeneath(dir, name string) (*os.File, error) {
	dfd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(dfd)
	flags := unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NOCTTY | unix.O_NONBLOCK
	fd, err := unix.Openat2(dfd, name, &unix.OpenHow{
		Flags:   uint64(flags),
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS,
	})
	if errors.Is(err, unix.ENOSYS) {
		fd, err = openNoFollow(dfd, name, flags)
	}
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), filepath.Join(dir, name)), nil
}

// openNoFollow opens the relative path name under dfd, one component at
// a time, following no symlink.
func openNoFollow(dfd int, name string, flags int) (int, error) {
	parts := strings.Split(name, "/")
	cur := dfd
	for i, p := range parts {
		last := i == len(parts)-1
		fl := unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
		if last {
			fl = flags | unix.O_NOFOLLOW
		}
		fd, err := unix.Openat(cur, p, fl, 0)
		if cur != dfd {
			unix.Close(cur)
		}
		if err != nil {
			return -1, err
		}
		cur = fd
	}
	return cur, nil
}

// registryHost is the host of an auths key as docker writes them:
// "registry.example.com:5000", "https://registry.example.com/v2/", or
// "https://index.docker.io/v1/" for Docker Hub.
func registryHost(key string) string {
	h := key
	if i := strings.Index(h, "://"); i >= 0 {
		h = h[i+3:]
	}
	h, _, _ = strings.Cut(h, "/")
	h = strings.ToLower(h)
	switch h {
	case "index.docker.io", "registry-1.docker.io", "docker.io":
		return "docker.io"
	}
	return h
}

// lookupAuth is the entry for host, as containerd names it when asking
// (Docker Hub as registry-1.docker.io).
func lookupAuth(auths map[string]dockerAuth, host string) (dockerAuth, bool) {
	a, ok := auths[registryHost(host)]
	return a, ok
}
