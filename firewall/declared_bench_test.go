package firewall

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flyd-dev/flyd/sandbox"
)

const reachBenchEnv = "FLYD_FIREWALL_REACH_BENCH"

// TestReachBenchHelper is not a test: re-executed with reachBenchEnv set
// to "connect ADDR N" it opens and closes N connections to ADDR, and to
// "stream ADDR BYTES" it sends BYTES over one; either prints how long that
// took and the CPU time it used, in nanoseconds.
func TestReachBenchHelper(t *testing.T) {
	f := strings.Fields(os.Getenv(reachBenchEnv))
	if len(f) != 3 {
		return
	}
	n, _ := strconv.Atoi(f[2])
	start := time.Now()
	switch f[0] {
	case "connect":
		for range n {
			c, err := net.Dial("tcp", f[1])
			if err != nil {
				fmt.Println("error", err)
				os.Exit(1)
			}
			c.Close()
		}
	case "stream":
		c, err := net.Dial("tcp", f[1])
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		buf := make([]byte, 256<<10)
		for sent := 0; sent < n; sent += len(buf) {
			if _, err := c.Write(buf); err != nil {
				fmt.Println("error", err)
				os.Exit(1)
			}
		}
		c.(*net.TCPConn).CloseWrite()
		_, _ = io.Copy(io.Discard, c) // the server's close: everything arrived
		c.Close()
	}
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	fmt.Println(time.Since(start).Nanoseconds(), ru.Utime.Nano()+ru.Stime.Nano())
	os.Exit(0)
}

// benchReach is a reach lab for benchmarks: a namespace whose listener
// accepts and drains, and a workload cgroup "client" whose helper process
// connects. With declared, the namespace has a reach table guarding the
// listener's port (and 999 others, each allowed 4 cgroups, as 1,000
// workloads with 3 uses each would be), allowing the client.
func benchReach(b *testing.B, declared bool) (run func(mode string, n int) (wall, cpu time.Duration)) {
	f, _ := testFirewall(b)
	l := newReachLab(b)
	client := l.workload("client")
	var ln net.Listener
	if err := l.nw.Do(func() error {
		var err error
		ln, err = net.Listen("tcp", "127.0.0.1:0")
		return err
	}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(io.Discard, c); c.Close() }()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	if declared {
		t := ReachTable{NS: l.nw.Path}
		for i := range 1000 {
			p, ids := 20000+i, []uint64{client + 1000 + uint64(i), client + 2000 + uint64(i), client + 3000 + uint64(i), client + 4000 + uint64(i)}
			if i == 0 {
				p, ids[0] = port, client
			}
			t.Local = append(t.Local, LocalDest{Port: p, Allowed: ids})
		}
		if err := f.SetReach(l.tree, []ReachTable{t}); err != nil {
			b.Fatal(err)
		}
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	return func(mode string, n int) (wall, cpu time.Duration) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestReachBenchHelper$", "-test.count=1")
		cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %s %d", reachBenchEnv, mode, addr, n))
		var out strings.Builder
		cmd.Stdout = &out
		cmd.SysProcAttr = &syscall.SysProcAttr{}
		g, err := l.cgs.Open("client")
		if err != nil {
			b.Fatal(err)
		}
		if err := sandbox.Start(l.nw, g, cmd.SysProcAttr, cmd.Start); err != nil {
			b.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			b.Fatalf("%v: %s", err, out.String())
		}
		var w, c int64
		if _, err := fmt.Sscan(out.String(), &w, &c); err != nil {
			b.Fatalf("helper said %q", out.String())
		}
		return time.Duration(w), time.Duration(c)
	}
}

// abRounds is how many times the off and declared runs take turns: on a
// shared machine the load changes from one second to the next, and
// alternating short runs has both see the same.
const abRounds = 20

// ab runs mode for n units in an off lab and in a declared one, in turns,
// and reports each one's rate (units a second of the client's time) and
// their ratio, and the ratio of the CPU time the client spent (the
// kernel's work for a connection on loopback, the rules' included, is
// done on its behalf): the one a busy machine disturbs least.
func ab(b *testing.B, mode string, n int, unit string, per float64) {
	off, declared := benchReach(b, false), benchReach(b, true)
	chunk := max(1, n/abRounds)
	var tOff, tDecl, cOff, cDecl time.Duration
	for done := 0; done < n; done += chunk {
		w, c := off(mode, chunk*int(per))
		tOff, cOff = tOff+w, cOff+c
		w, c = declared(mode, chunk*int(per))
		tDecl, cDecl = tDecl+w, cDecl+c
	}
	rate := func(d time.Duration) float64 { return float64(n) * per / d.Seconds() }
	if mode == "stream" {
		rate = func(d time.Duration) float64 { return float64(n) * per / d.Seconds() / 1e6 }
	}
	b.ReportMetric(rate(tOff), unit+"-off")
	b.ReportMetric(rate(tDecl), unit+"-declared")
	b.ReportMetric(rate(tDecl)/rate(tOff), "declared/off")
	b.ReportMetric(cOff.Seconds()/cDecl.Seconds(), "declared/off-cpu")
}

// BenchmarkDeclaredReachConnect is a connection opened and closed by a
// workload's process to an endpoint of its namespace, in a namespace
// with no reach table and in one under declared reach (the workload
// allowed, among 1,000 guarded ports), taking turns. The rates are the
// client's own, without its start.
func BenchmarkDeclaredReachConnect(b *testing.B) {
	ab(b, "connect", b.N, "conns/s", 1)
}

// BenchmarkDeclaredReachThroughput is 256 KiB sent by a workload's
// process over one connection to an endpoint of its namespace, off and
// declared, taking turns.
func BenchmarkDeclaredReachThroughput(b *testing.B) {
	b.SetBytes(256 << 10)
	ab(b, "stream", b.N, "MB/s", 256<<10)
}

// BenchmarkDeclaredReachWrite is declared reach put in force for 1,000
// workloads of one network with an endpoint and 3 uses each: the table
// made whole (a daemon's first write), and one uses changed in it.
func BenchmarkDeclaredReachWrite(b *testing.B) {
	f, _ := testFirewall(b)
	l := newReachLab(b)
	table := func(extra uint64) ReachTable {
		t := ReachTable{NS: l.nw.Path}
		for i := range 1000 {
			id := uint64(100000 + i)
			t.Local = append(t.Local, LocalDest{Port: 20000 + i,
				Allowed: []uint64{id, 100000 + uint64((i+1)%1000), 100000 + uint64((i+2)%1000), 100000 + uint64((i+3)%1000)}})
		}
		if extra != 0 {
			t.Local[0].Allowed = append(t.Local[0].Allowed, extra)
		}
		return t
	}
	b.Run("whole", func(b *testing.B) {
		full, empty := []ReachTable{table(0)}, []ReachTable{{NS: l.nw.Path}}
		for b.Loop() {
			b.StopTimer()
			if err := f.SetReach(l.tree, empty); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			if err := f.SetReach(l.tree, full); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("one-use", func(b *testing.B) {
		ts := [2][]ReachTable{{table(0)}, {table(7)}}
		i := 0
		for b.Loop() {
			i++
			if err := f.SetReach(l.tree, ts[i%2]); err != nil {
				b.Fatal(err)
			}
		}
	})
}
