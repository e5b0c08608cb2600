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
// parentheses, so fields are counted from the last ')'.
func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: malformed", pid)
	}
	// After ')': state(3) ppid(4) ... starttime(22); index 0 is state.
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: malformed", pid)
	}
	ticks, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return procStat{}, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return procStat{startTicks: ticks, zombie: f[0] == "Z" || f[0] == "X"}, nil
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
