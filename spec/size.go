package spec

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Size is a number of bytes. In a spec it is a number of bytes or a string
// such as "256Mi": Ki, Mi, Gi and Ti are powers of 1024, K, M, G and T powers
// of 1000. It always marshals back as a plain number of bytes.
type Size int64

var sizeSuffixes = []struct {
	suffix string
	factor int64
}{
	// Two-letter suffixes first, so "Mi" is not read as "M" followed by junk.
	{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"Ti", 1 << 40},
	{"K", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12},
}

const sizeRule = `write bytes or a whole number with a suffix Ki, Mi, Gi, Ti (1024) or K, M, G, T (1000), like "256Mi"`

// ParseSize parses "256Mi", "1G" or "1048576".
func ParseSize(s string) (Size, error) {
	digits, factor := s, int64(1)
	for _, u := range sizeSuffixes {
		if d, ok := strings.CutSuffix(s, u.suffix); ok {
			digits, factor = d, u.factor
			break
		}
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("invalid size %q: %s", s, sizeRule)
	}
	if n > math.MaxInt64/factor || n < math.MinInt64/factor {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return Size(n * factor), nil
}

// String uses the largest binary suffix that divides the size exactly, so
// logs show "256Mi" rather than 268435456.
func (s Size) String() string {
	for i := 3; i >= 0 && s != 0; i-- {
		if u := sizeSuffixes[i]; int64(s)%u.factor == 0 {
			return strconv.FormatInt(int64(s)/u.factor, 10) + u.suffix
		}
	}
	return strconv.FormatInt(int64(s), 10)
}

func (s Size) MarshalJSON() ([]byte, error) { return strconv.AppendInt(nil, int64(s), 10), nil }

func (s *Size) UnmarshalJSON(data []byte) error { return unmarshalScalar(data, s) }

func (s *Size) decodeScalar(kind nodeKind, text string) error {
	switch kind {
	case numberNode:
		n, err := strconv.ParseInt(text, 10, 64)
		if err != nil {
			return fmt.Errorf("invalid size %s: %s", text, sizeRule)
		}
		*s = Size(n)
		return nil
	case stringNode:
		v, err := ParseSize(text)
		if err != nil {
			return err
		}
		*s = v
		return nil
	}
	return fmt.Errorf("expected a size like \"256Mi\", got %s", kind)
}
