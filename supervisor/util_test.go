package supervisor

import (
	"strconv"
	"strings"
	"time"
)

func itoa(n int) string           { return strconv.Itoa(n) }
func contains(s, sub string) bool { return strings.Contains(s, sub) }
func containsState(stat, st string) bool {
	i := strings.LastIndexByte(stat, ')')
	return i >= 0 && strings.HasPrefix(strings.TrimSpace(stat[i+1:]), st)
}

func sleepBriefly() { time.Sleep(5 * time.Millisecond) }
