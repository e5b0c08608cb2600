package native

import (
	"os"
	"testing"
)

func TestParseStat(t *testing.T) {
	for _, tc := range []struct {
		line   string
		ticks  uint64
		zombie bool
		bad    bool
	}{
		{line: "42 (sleep) S 1 42 42 0 -1 4194560 108 0 0 0 0 0 0 0 20 0 1 0 98765 2314240 128 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n", ticks: 98765},
		// A name with spaces and parentheses: fields count from the last ')'.
		{line: "7 (a) b) (c) Z 1 7 7 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0\n", ticks: 5, zombie: true},
		{line: "7 (x) X 1 7 7 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 6", ticks: 6, zombie: true},
		{line: "7 (x) S 1 7 7", bad: true},
		{line: "7 x S 1", bad: true},
		{line: "7 (x) S 1 7 7 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 notanumber 0\n", bad: true},
	} {
		got, err := parseStat("stat", []byte(tc.line))
		if tc.bad {
			if err == nil {
				t.Errorf("%q: parsed as %+v, want an error", tc.line, got)
			}
			continue
		}
		if err != nil || got.startTicks != tc.ticks || got.zombie != tc.zombie {
			t.Errorf("%q: got %+v, %v; want ticks %d zombie %v", tc.line, got, err, tc.ticks, tc.zombie)
		}
	}
}

func TestReadStatOfSelf(t *testing.T) {
	st, err := readStat(os.Getpid())
	if err != nil || st.startTicks == 0 || st.zombie {
		t.Fatalf("readStat(self) = %+v, %v", st, err)
	}
	if _, err := readStat(1 << 30); !os.IsNotExist(err) {
		t.Fatalf("readStat of no process: %v, want not-exist", err)
	}
}
