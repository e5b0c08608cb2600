package containerd

import (
	"bytes"
	"errors"
	"io/fs"
	"os"

	"github.com/flyd-dev/flyd/sandbox"
)

// HostName is the name by which a container reaches the host, as Docker
// Desktop gives it and as codefly's container addresses use it.
const HostName = "host.docker.internal"

// hostsLocal is what every /etc/hosts a container gets starts with.
const hostsLocal = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"

// hostsFile is the /etc/hosts of a container of network nw (nil for the
// host's). HostName is the host side of the network's link, the
// container's gateway; on the host's network it is 127.0.0.1, after the
// host's own /etc/hosts. An island, which nothing on the host can be
// reached from, has no such name.
func hostsFile(nw *sandbox.Network) ([]byte, error) {
	var b bytes.Buffer
	switch {
	case nw == nil:
		own, err := os.ReadFile("/etc/hosts")
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		if len(own) == 0 {
			own = []byte(hostsLocal)
		}
		b.Write(own)
		if own[len(own)-1] != '\n' {
			b.WriteByte('\n')
		}
		b.WriteString("127.0.0.1\t" + HostName + "\n")
	case nw.Link != nil:
		b.WriteString(hostsLocal)
		b.WriteString(nw.Link.Host.String() + "\t" + HostName + "\n")
	default:
		b.WriteString(hostsLocal)
	}
	return b.Bytes(), nil
}

// writeHosts makes /etc/hosts of the container's root r hosts: whatever
// the image had there (a file, a link) is replaced, never followed.
func writeHosts(r *os.Root, hosts []byte) error {
	if err := r.MkdirAll("etc", 0o755); err != nil {
		return err
	}
	if err := r.Remove("etc/hosts"); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	f, err := r.OpenFile("etc/hosts", os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	_, werr := f.Write(hosts)
	if werr == nil {
		werr = f.Chmod(0o644)
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	return werr
}
