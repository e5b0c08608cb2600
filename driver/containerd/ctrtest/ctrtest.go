// Package ctrtest helps tests that need a real containerd: it starts a
// private containerd daemon (own config, root, state and socket under a
// directory) and builds a tiny busybox OCI image archive at test time, since
// no registry can be reached. It uses only the standard library.
package ctrtest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// Busybox is where busybox-static installs its static binary.
const Busybox = "/bin/busybox"

// Daemon is a private containerd.
type Daemon struct {
	Dir    string // holds config.toml, root/, state/, containerd.sock, containerd.log
	Socket string
	cmd    *exec.Cmd
}

// StartDaemon starts containerd (from PATH) with everything under dir and
// waits until its socket answers.
func StartDaemon(dir string) (*Daemon, error) {
	bin, err := exec.LookPath("containerd")
	if err != nil {
		return nil, fmt.Errorf("containerd binary: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	d := &Daemon{Dir: dir, Socket: filepath.Join(dir, "containerd.sock")}
	cfg := fmt.Sprintf(`version = 2
root = %q
state = %q
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = %q
[ttrpc]
  address = %q
[debug]
  address = %q
[metrics]
  address = ""
`, filepath.Join(dir, "root"), filepath.Join(dir, "state"), d.Socket,
		filepath.Join(dir, "containerd.sock.ttrpc"), filepath.Join(dir, "debug.sock"))
	conf := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(conf, []byte(cfg), 0o600); err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(dir, "containerd.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	d.cmd = exec.Command(bin, "--config", conf)
	d.cmd.Stdout, d.cmd.Stderr = logf, logf
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := d.cmd.Start(); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.Dial("unix", d.Socket); err == nil {
			c.Close()
			return d, nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	d.Stop()
	b, _ := os.ReadFile(filepath.Join(dir, "containerd.log"))
	return nil, fmt.Errorf("containerd did not come up on %s: %s", d.Socket, lastLines(string(b), 10))
}

// Stop stops the daemon (shims of still-running tasks survive, as with a
// real daemon).
func (d *Daemon) Stop() {
	if d.cmd == nil || d.cmd.Process == nil {
		return
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = d.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = d.cmd.Process.Kill()
		<-done
	}
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

// Passwd and Group are the image's /etc/passwd and /etc/group: root and
// nobody (65534:65534), plus "app" (1000:1000).
const (
	Passwd = "root:x:0:0:root:/root:/bin/sh\napp:x:1000:1000:app:/home/app:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/sh\n"
	Group  = "root:x:0:\napp:x:1000:\nnogroup:x:65534:\n"
)

// BusyboxArchive writes an OCI image archive (tar) at path holding one
// image named name (e.g. "docker.io/library/bbox:latest"): static busybox
// with every applet linked in /bin, /etc/passwd and /etc/group, Cmd
// ["/bin/sh"], PATH=/bin:/usr/bin.
func BusyboxArchive(path, name string) error {
	bb, err := os.ReadFile(Busybox)
	if err != nil {
		return fmt.Errorf("static busybox (install busybox-static): %w", err)
	}
	out, err := exec.Command(Busybox, "--list").Output()
	if err != nil {
		return fmt.Errorf("busybox --list: %w", err)
	}
	// The layer: an uncompressed tar, hashed for the diff id, then gzipped.
	var raw bytes.Buffer
	tw := tar.NewWriter(&raw)
	now := time.Unix(1700000000, 0)
	dir := func(n string, mode int64) {
		_ = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: n + "/", Mode: mode, ModTime: now})
	}
	file := func(n string, mode int64, b []byte) {
		_ = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: n, Mode: mode, Size: int64(len(b)), ModTime: now})
		_, _ = tw.Write(b)
	}
	for _, d := range []string{"bin", "etc", "tmp", "root", "home", "home/app", "proc", "sys", "dev", "usr", "usr/bin", "var"} {
		mode := int64(0o755)
		if d == "tmp" {
			mode = 0o1777
		}
		dir(d, mode)
	}
	file("bin/busybox", 0o755, bb)
	for _, a := range strings.Fields(string(out)) {
		if a == "busybox" || strings.Contains(a, "/") {
			continue
		}
		_ = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: "bin/" + a, Linkname: "busybox", Mode: 0o777, ModTime: now})
	}
	file("etc/passwd", 0o644, []byte(Passwd))
	file("etc/group", 0o644, []byte(Group))
	if err := tw.Close(); err != nil {
		return err
	}
	diffID := sha(raw.Bytes())
	var gz bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&gz, gzip.BestSpeed)
	_, _ = zw.Write(raw.Bytes())
	if err := zw.Close(); err != nil {
		return err
	}
	layer := gz.Bytes()

	config, _ := json.Marshal(map[string]any{
		"architecture": runtime.GOARCH,
		"os":           "linux",
		"created":      now.UTC().Format(time.RFC3339),
		"config": map[string]any{
			"Env": []string{"PATH=/bin:/usr/bin"},
			"Cmd": []string{"/bin/sh"},
		},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{diffID}},
	})
	manifest, _ := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.manifest.v1+json",
		"config":        desc("application/vnd.oci.image.config.v1+json", config, nil),
		"layers":        []any{desc("application/vnd.oci.image.layer.v1.tar+gzip", layer, nil)},
	})
	tag := name[strings.LastIndex(name, ":")+1:]
	if strings.LastIndex(name, ":") < strings.LastIndex(name, "/") {
		tag = "latest"
	}
	index, _ := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.index.v1+json",
		"manifests": []any{desc("application/vnd.oci.image.manifest.v1+json", manifest, map[string]any{
			"annotations": map[string]string{
				"io.containerd.image.name":          name,
				"org.opencontainers.image.ref.name": tag,
			},
			"platform": map[string]string{"architecture": runtime.GOARCH, "os": "linux"},
		})},
	})

	f, err := os.Create(path)
	if err != nil {
		return err
	}
	aw := tar.NewWriter(f)
	add := func(n string, b []byte) {
		_ = aw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: n, Mode: 0o644, Size: int64(len(b)), ModTime: now})
		_, _ = aw.Write(b)
	}
	add("oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`))
	for _, b := range [][]byte{layer, config, manifest} {
		add("blobs/sha256/"+strings.TrimPrefix(sha(b), "sha256:"), b)
	}
	add("index.json", index)
	return errors.Join(aw.Close(), f.Close())
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

func desc(mt string, b []byte, extra map[string]any) map[string]any {
	m := map[string]any{"mediaType": mt, "digest": sha(b), "size": len(b)}
	for k, v := range extra {
		m[k] = v
	}
	return m
}
