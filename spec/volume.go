package spec

import (
	"errors"
	"fmt"
	"path"
	"strings"
)

// Volume is one entry of containerd.volumes, written as compose's short
// syntax: SOURCE:TARGET[:MODE]. A SOURCE that starts with '/' is a host
// path, bind-mounted as it is; any other is the name of a volume of the
// workload's project, a directory the daemon keeps for it.
type Volume struct {
	// Source is an absolute host path, or a volume's name.
	Source string
	// Target is the absolute path inside the container.
	Target string
	// ReadOnly is MODE ro; rw, the default, may be written too.
	ReadOnly bool
}

// Named says whether the volume is a named volume, not a host path.
func (v Volume) Named() bool { return !strings.HasPrefix(v.Source, "/") }

// CarrierDir is where a container finds the values too large for its
// environment (the containerd runtime writes them there): no volume may
// be mounted on it, above it or in it, or it would hide them.
const CarrierDir = "/codefly/configuration"

// ParseVolume reads one entry of containerd.volumes: HOST:CONTAINER[:ro],
// HOST an absolute path, or NAME:CONTAINER[:ro], NAME a DNS label. The
// error says what is wrong with the entry, never which entry it is.
func ParseVolume(s string) (Volume, error) {
	var v Volume
	if strings.ContainsRune(s, 0) {
		return v, errors.New("must not contain a NUL byte")
	}
	parts := strings.Split(s, ":")
	switch {
	case len(parts) == 1:
		return v, errors.New("needs a source: HOST:CONTAINER or NAME:CONTAINER, with :ro to mount it read-only (an anonymous volume is not supported)")
	case len(parts) > 3:
		return v, errors.New("must be SOURCE:TARGET or SOURCE:TARGET:MODE; a path cannot hold ':'")
	case len(parts) == 3:
		switch parts[2] {
		case "ro":
			v.ReadOnly = true
		case "rw":
		default:
			return v, fmt.Errorf("the mode %q must be ro or rw", parts[2])
		}
	}
	src, dst := parts[0], parts[1]
	switch {
	case src == "":
		return v, errors.New("the source is empty: a host path (/srv/data) or a volume's name (data)")
	case strings.HasPrefix(src, "/"):
		v.Source = path.Clean(src)
	case strings.HasPrefix(src, ".") || strings.HasPrefix(src, "~"):
		return v, fmt.Errorf("the host path %q must be absolute", src)
	case !validName(src):
		return v, fmt.Errorf("the volume name %q must be %s (or a host path starting with '/')", src, nameRule)
	default:
		v.Source = src
	}
	switch {
	case !strings.HasPrefix(dst, "/"):
		return v, fmt.Errorf("the container path %q must be absolute", dst)
	case path.Clean(dst) == "/":
		return v, errors.New("the container path cannot be / (the image's own root)")
	}
	v.Target = path.Clean(dst)
	if within(v.Target, CarrierDir) || within(CarrierDir, v.Target) {
		return v, fmt.Errorf("the container path %s would hide %s, where large values are delivered", v.Target, CarrierDir)
	}
	return v, nil
}

// within says whether p is dir or a path under it; both are clean.
func within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, dir+"/")
}

// validateVolumes judges every entry of containerd.volumes, and refuses
// two on one container path.
func (c *Containerd) validateVolumes(p *problems) {
	targets := make(map[string]int, len(c.Volumes))
	for i, s := range c.Volumes {
		field := indexPath("containerd.volumes", i)
		v, err := ParseVolume(s)
		if err != nil {
			p.add(field, "%v", err)
			continue
		}
		if j, dup := targets[v.Target]; dup {
			p.add(field, "%s is already the container path of containerd.volumes[%d]", v.Target, j)
			continue
		}
		targets[v.Target] = i
	}
}
