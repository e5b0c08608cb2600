package netalloc

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// tcpListen is the st column of a listening socket in /proc/net/tcp.
const tcpListen = "0A"

// socketInode returns the inode of the socket bound to port in the tables
// under netDir (tcp and tcp6), preferring a listener, or 0. Reading
// /proc/thread-self/net gives the calling thread's namespace;
// /proc/self/net would give the main thread's, the host's.
func socketInode(netDir string, port int) uint64 {
	var bound uint64
	for _, name := range []string{"tcp", "tcp6"} {
		f, err := os.Open(filepath.Join(netDir, name))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Scan() // header
		for sc.Scan() {
			inode, state, ok := parseTCPLine(sc.Text(), port)
			if !ok {
				continue
			}
			if state == tcpListen {
				f.Close()
				return inode
			}
			if bound == 0 {
				bound = inode
			}
		}
		f.Close()
	}
	return bound
}

// parseTCPLine reads one /proc/net/tcp row:
// "sl local_address rem_address st ... uid timeout inode ...", where the
// local address ends in ":PORT" in hex.
func parseTCPLine(line string, port int) (inode uint64, state string, ok bool) {
	f := strings.Fields(line)
	if len(f) < 10 {
		return 0, "", false
	}
	i := strings.LastIndexByte(f[1], ':')
	if i < 0 {
		return 0, "", false
	}
	p, err := strconv.ParseUint(f[1][i+1:], 16, 16)
	if err != nil || int(p) != port {
		return 0, "", false
	}
	inode, err = strconv.ParseUint(f[9], 10, 64)
	if err != nil || inode == 0 {
		return 0, "", false
	}
	return inode, f[3], true
}

// socketOwner finds a process with a descriptor on socket inode by
// scanning procDir/*/fd, and its command name. Processes it may not read
// are skipped: the message then lacks a pid, it does not fail.
func socketOwner(procDir string, inode uint64) (pid int, program string) {
	want := "socket:[" + strconv.FormatUint(inode, 10) + "]"
	procs, err := os.ReadDir(procDir)
	if err != nil {
		return 0, ""
	}
	for _, p := range procs {
		n, err := strconv.Atoi(p.Name())
		if err != nil || n <= 0 {
			continue
		}
		fdDir := filepath.Join(procDir, p.Name(), "fd")
		fds, err := os.ReadDir(fdDir)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			if link, err := os.Readlink(filepath.Join(fdDir, fd.Name())); err == nil && link == want {
				comm, _ := os.ReadFile(filepath.Join(procDir, p.Name(), "comm"))
				return n, strings.TrimSpace(string(comm))
			}
		}
	}
	return 0, ""
}
