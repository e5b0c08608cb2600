package integration

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flyd-dev/flyd/internal/testenv"
)

// freePort is a loopback TCP port nothing listens on right now.
var freePort = testenv.FreePort

// httpGet fetches http://addr/path without keeping the connection.
func httpGet(addr, path string) (string, error) {
	c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get("http://" + addr + path)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return string(b), err
}

// procState is a process as /proc shows it.
type procState struct {
	state      byte // R, S, Z, ...
	ppid, pgrp int
}

func readProc(pid int) (procState, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procState{}, false
	}
	i := bytes.LastIndexByte(b, ')')
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 4 {
		return procState{}, false
	}
	ppid, _ := strconv.Atoi(f[1])
	pgrp, _ := strconv.Atoi(f[2])
	return procState{state: f[0][0], ppid: ppid, pgrp: pgrp}, true
}

// alive reports whether pid is a process that still runs (a zombie does not).
func alive(pid int) bool {
	ps, ok := readProc(pid)
	return ok && ps.state != 'Z' && ps.state != 'X'
}

// reaped checks that pid no longer runs and that parent, its parent while
// it ran, did not leave it a zombie.
func reaped(pid, parent int) error {
	ps, ok := readProc(pid)
	switch {
	case !ok:
		return nil
	case ps.state != 'Z' && ps.state != 'X':
		return fmt.Errorf("pid %d still runs (state %c)", pid, ps.state)
	case ps.ppid == parent:
		return fmt.Errorf("pid %d is a zombie its parent %d never reaped", pid, parent)
	}
	return nil
}

// processesUnder lists the running processes whose program path (argv[0])
// lies under dir: the processes of one test's workloads.
func processesUnder(dir string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(b) == 0 {
			continue // gone, a kernel thread, or a zombie
		}
		argv0, _, _ := bytes.Cut(b, []byte{0})
		if strings.HasPrefix(string(argv0), dir+"/") && alive(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// portFree reports whether a listener can be bound on addr now.
func portFree(addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	return l.Close()
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	if err := os.Link(from, to); err == nil {
		return
	}
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o755); err != nil {
		t.Fatal(err)
	}
}

// readPids reads the pid file a testprog spawner writes, once it exists.
func readPids(t *testing.T, path string) []int {
	t.Helper()
	var pids []int
	eventually(t, "pid file "+path, func() error {
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		pids = nil
		for _, f := range strings.Fields(string(b)) {
			p, err := strconv.Atoi(f)
			if err != nil {
				return err
			}
			pids = append(pids, p)
		}
		return nil
	})
	return pids
}
