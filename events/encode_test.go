package events

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/flyd-dev/flyd/status"
)

// TestRecordEncoding: a history line is json.Marshal's bytes, whatever
// the event holds, and a time json.Marshal refuses is refused.
func TestRecordEncoding(t *testing.T) {
	at := time.Date(2026, 12, 2, 20, 45, 1, 123456789, time.UTC)
	zone := time.FixedZone("x", -3*3600-1800)
	records := []eventRecord{
		{},
		{Seq: 1, Time: at, Type: status.EventState, Workload: "web", State: status.Running},
		{Seq: 2, Time: at.In(zone), Type: status.EventExit, Workload: "ns.web", Project: "ns", Message: `said "no" <&> \ é` + "\n\t\x01\u2028\xff",
			Exit: &ExitRecord{Code: 143, Signal: "SIGTERM", At: at.Truncate(time.Second), Unknown: true, Reason: "r", Description: "killed by SIGTERM"}, By: 1000},
		{Seq: 1 << 63, Time: time.Time{}, Type: "x", Exit: &ExitRecord{Code: -1}},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"a", "Z", "0", " ", `"`, `\`, "<", ">", "&", "\n", "\x00", "\x7f", "é", "\u2028", "\u2029", "\xff", "\xe2\x82", "🙂"}
	word := func() string {
		var s strings.Builder
		for range rng.IntN(8) {
			s.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		return s.String()
	}
	for range 2000 {
		r := eventRecord{Seq: rng.Uint64(), Time: time.Unix(rng.Int64N(1<<34), rng.Int64N(1e9)), Type: word(), Workload: word(),
			Project: word(), State: status.State(word()), Message: word(), By: rng.Uint32() % 3}
		if rng.IntN(2) == 0 {
			r.Exit = &ExitRecord{Code: rng.IntN(300) - 10, Signal: word(), At: time.Unix(rng.Int64N(1<<34), 0), Unknown: rng.IntN(2) == 0, Reason: word(), Description: word()}
		}
		records = append(records, r)
	}
	for _, r := range records {
		want, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		got, err := appendRecord([]byte("prefix"), r)
		if err != nil || !bytes.Equal(got, append([]byte("prefix"), want...)) {
			t.Fatalf("%+v:\n got %s (%v)\nwant prefix%s", r, got, err, want)
		}
	}
	far := eventRecord{Time: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}
	if got, err := appendRecord([]byte("p"), far); err == nil || string(got) != "p" {
		t.Fatalf("a time past 9999: %q, %v", got, err)
	}
}

func BenchmarkRecordEncoding(b *testing.B) {
	r := eventRecord{Seq: 42, Time: time.Now(), Type: status.EventExit, Workload: "web", State: status.Stopped, Message: "stopped by request",
		Exit: &ExitRecord{Code: 143, Signal: "SIGTERM", At: time.Now(), Description: "killed by SIGTERM"}}
	b.Run("json.Marshal", func(b *testing.B) {
		for b.Loop() {
			_, _ = json.Marshal(r)
		}
	})
	b.Run("appendRecord", func(b *testing.B) {
		var buf []byte
		for b.Loop() {
			buf, _ = appendRecord(buf[:0], r)
		}
	})
}
