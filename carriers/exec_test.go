package carriers

import (
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// execWithStack runs path with argv and env from a child whose
// RLIMIT_STACK is stack, and returns execve's error (nil if it ran). The
// child is this test binary re-executed, so the limit never touches the
// test process itself.
func execWithStack(t *testing.T, path string, argv, env []string, stack uint64) error {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestExecHelper$")
	cmd.Env = []string{"CARRIERS_EXEC_HELPER=1", "STACK=" + strconv.FormatUint(stack, 10), "PROG=" + path}
	cmd.Stdin = strings.NewReader(strings.Join(argv, "\x00") + "\x01" + strings.Join(env, "\x00"))
	out, _ := cmd.CombinedOutput()
	s := string(out)
	switch {
	case strings.Contains(s, "EXEC-OK"):
		return nil
	case strings.Contains(s, "EXEC-ERR "+strconv.Itoa(int(syscall.E2BIG))):
		return syscall.E2BIG
	}
	t.Fatalf("exec helper: %s", s)
	return nil
}

func TestExecHelper(t *testing.T) {
	if os.Getenv("CARRIERS_EXEC_HELPER") != "1" {
		t.Skip("helper process for execWithStack")
	}
	stack, _ := strconv.ParseUint(os.Getenv("STACK"), 10, 64)
	in, _ := io.ReadAll(os.Stdin)
	parts := strings.SplitN(string(in), "\x01", 2)
	argv, env := strings.Split(parts[0], "\x00"), strings.Split(parts[1], "\x00")
	if err := unix.Setrlimit(unix.RLIMIT_STACK, &unix.Rlimit{Cur: stack, Max: stack}); err != nil {
		os.Stdout.WriteString("setrlimit failed\n")
		os.Exit(0)
	}
	pid, err := syscall.ForkExec(os.Getenv("PROG"), argv, &syscall.ProcAttr{Env: env})
	if err != nil {
		os.Stdout.WriteString("EXEC-ERR " + strconv.Itoa(int(err.(syscall.Errno))) + "\n")
		os.Exit(0)
	}
	var ws syscall.WaitStatus
	_, _ = syscall.Wait4(pid, &ws, 0, nil)
	os.Stdout.WriteString("EXEC-OK\n")
	os.Exit(0)
}
