package carriers

import (
	"fmt"
	"os"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/flyd-dev/flyd/errdefs"
)

// The kernel's limits on what execve accepts, and flyd's own budget.
var (
	// MaxArgStrlen is MAX_ARG_STRLEN: 32 pages. One argument or KEY=VALUE
	// string, its NUL included, may not be longer.
	MaxArgStrlen = 32 * os.Getpagesize()
	// argMax is ARG_MAX, the floor the kernel grants the strings whatever
	// the stack limit.
	argMax = 32 * os.Getpagesize()
)

const (
	// FileCarrierThreshold: a value longer than this is delivered by file.
	FileCarrierThreshold = 32 << 10
	// MaxInlineCodeflyBytes caps the CODEFLY__ values left inline in total.
	MaxInlineCodeflyBytes = 512 << 10
	// stkLim is the kernel's _STK_LIM (8 MiB); strings may take at most
	// three quarters of it.
	stkLim  = 8 << 20
	ptrSize = 8
)

// ArgumentTooLongError refuses one argument. It never holds the argument.
type ArgumentTooLongError struct {
	Index int
	Size  int
}

func (e *ArgumentTooLongError) Error() string {
	return fmt.Sprintf("argument %d is %d bytes; the kernel refuses any argument of %d bytes or more (MAX_ARG_STRLEN, NUL included)",
		e.Index, e.Size, MaxArgStrlen)
}

func (e *ArgumentTooLongError) Unwrap() error { return errdefs.ErrArgumentTooLong }

// KeySize names an environment variable and the size of its KEY=VALUE
// string, never its value.
type KeySize struct {
	Key  string
	Size int
}

// EnvironmentTooLargeError refuses an environment, naming its largest keys.
type EnvironmentTooLargeError struct {
	Reason string
	Keys   []KeySize // largest first
}

func (e *EnvironmentTooLargeError) Error() string {
	parts := make([]string, 0, len(e.Keys))
	for i, k := range e.Keys {
		if i == 5 {
			parts = append(parts, fmt.Sprintf("and %d more", len(e.Keys)-5))
			break
		}
		parts = append(parts, fmt.Sprintf("%s (%d bytes)", k.Key, k.Size))
	}
	return e.Reason + "; largest: " + strings.Join(parts, ", ")
}

func (e *EnvironmentTooLargeError) Unwrap() error { return errdefs.ErrEnvironmentTooLarge }

// StackLimit is the RLIMIT_STACK a child of this process starts with.
func StackLimit() uint64 {
	var r unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_STACK, &r); err != nil {
		return stkLim
	}
	return r.Cur
}

// StringsLimit is the room execve gives argv and envp strings for a stack
// limit, computed as the kernel does (bprm_stack_limits): a quarter of the
// stack, at most three quarters of _STK_LIM, at least ARG_MAX, less one
// pointer per string.
func StringsLimit(stack uint64, argc, envc int) int64 {
	limit := uint64(stkLim / 4 * 3)
	if stack/4 < limit {
		limit = stack / 4
	}
	if limit < uint64(argMax) {
		limit = uint64(argMax)
	}
	return int64(limit) - int64(max(argc, 1)+envc)*ptrSize
}

// CheckExec refuses what execve would refuse with E2BIG, and the inline
// CODEFLY__ values over flyd's budget. path is the program as passed to
// execve (the kernel copies it too); stack is the child's RLIMIT_STACK.
func CheckExec(path string, argv, env []string, stack uint64) error {
	total := int64(len(path) + 1)
	for i, a := range argv {
		if len(a)+1 > MaxArgStrlen {
			return &ArgumentTooLongError{Index: i, Size: len(a) + 1}
		}
		total += int64(len(a) + 1)
	}
	var long, codefly []KeySize
	codeflyBytes := 0
	sizes := make([]KeySize, 0, len(env))
	for _, kv := range env {
		key, value, _ := strings.Cut(kv, "=")
		ks := KeySize{Key: key, Size: len(kv) + 1}
		sizes = append(sizes, ks)
		total += int64(ks.Size)
		if ks.Size > MaxArgStrlen {
			long = append(long, ks)
		}
		if strings.HasPrefix(key, Prefix) && !strings.HasPrefix(key, FilePrefix) {
			codefly = append(codefly, ks)
			codeflyBytes += len(value)
		}
	}
	switch {
	case len(long) > 0:
		return &EnvironmentTooLargeError{
			Reason: fmt.Sprintf("%d environment %s of %d bytes or more (MAX_ARG_STRLEN, NUL included), which the kernel refuses",
				len(long), plural(len(long), "string is", "strings are"), MaxArgStrlen),
			Keys: largestFirst(long),
		}
	case codeflyBytes > MaxInlineCodeflyBytes:
		return &EnvironmentTooLargeError{
			Reason: fmt.Sprintf("inline CODEFLY__ values take %d bytes, over the %d-byte budget", codeflyBytes, MaxInlineCodeflyBytes),
			Keys:   largestFirst(codefly),
		}
	}
	if limit := StringsLimit(stack, len(argv), len(env)); total > limit {
		return &EnvironmentTooLargeError{
			Reason: fmt.Sprintf("arguments and environment take %d bytes; with a stack limit of %d bytes execve allows %d (ARG_MAX)",
				total, stack, limit),
			Keys: largestFirst(sizes),
		}
	}
	return nil
}

func largestFirst(ks []KeySize) []KeySize {
	sort.SliceStable(ks, func(i, j int) bool { return ks[i].Size > ks[j].Size })
	return ks
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
