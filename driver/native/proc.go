package native

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

type procStat struct {
	startTicks uint64
	zombie     bool
}

// readStat reads /proc/PID/stat. The command name may contain spaces and
// parentheses, so fields are counted from the last ')'. It is read in one
// read(2) into a buffer on the stack: a restart adopting thousands of runs
// reads one each, and the line is a few hundred bytes.
func readStat(pid int) (procStat, error) {
	path := "/proc/" + strconv.Itoa(pid) + "/stat"
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return procStat{}, &os.PathError{Op: "open", Path: path, Err: err}
	}
	var buf [1024]byte
	n, err := unix.Read(fd, buf[:])
	unix.Close(fd)
	if err != nil {
		return procStat{}, &os.PathError{Op: "read", Path: path, Err: err}
	}
	b := buf[:n]
	if n == len(buf) {
		// Longer than any stat line seen: read it whole.
		if b, err = os.ReadFile(path); err != nil {
			return procStat{}, err
		}
	}
	return parseStat(path, b)
}

// parseStat takes the state and the start time from a stat line.
func parseStat(path string, b []byte) (procStat, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("%s: malformed", path)
	}
	// After ')': state(3) ppid(4) ... starttime(22); field 0 is state.
	var state, start []byte
	rest := b[i+1:]
	for f := 0; f <= 19; f++ {
		rest = bytes.TrimLeft(rest, " ")
		end := bytes.IndexAny(rest, " \n")
		if end < 0 {
			end = len(rest)
		}
		switch f {
		case 0:
			state = rest[:end]
		case 19:
			start = rest[:end]
		}
		rest = rest[end:]
	}
	if len(state) == 0 || len(start) == 0 {
		return procStat{}, fmt.Errorf("%s: malformed", path)
	}
	ticks, err := strconv.ParseUint(string(start), 10, 64)
	if err != nil {
		return procStat{}, fmt.Errorf("%s: %w", path, err)
	}
	return procStat{startTicks: ticks, zombie: state[0] == 'Z' || state[0] == 'X'}, nil
}

var bootID = sync.OnceValue(func() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
})

func pidfdOpen(pid int) (int, error) {
	return unix.PidfdOpen(pid, 0)
}
