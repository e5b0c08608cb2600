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
// took, in nanoseconds.
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
	fmt.Println(time.Since(start).Nanoseconds())
	os.Exit(0)
}

// benchReach is a reach lab for benchmarks: a namespace whose listener
// accepts and drains, and a workload cgroup "client" whose helper process
// connects. With declared, the namespace has a reach table guarding the
// listener's port (and 999 others, each allowed 4 cgroups, as 1,000
// workloads with 3 uses each would be), allowing the client.
func benchReach(b *testing.B, declared bool) (run func(mode string, n int) time.Duration) {
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
	return func(mode string, n int) time.Duration {
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
		ns, err := strconv.ParseInt(strings.TrimSpace(out.String()), 10, 64)
		if err != nil {
			b.Fatalf("helper said %q", out.String())
		}
		return time.Duration(ns)
	}
}

// BenchmarkDeclaredReachConnect is one connection opened and closed by a
// workload's process to an endpoint of its namespace: with no reach
// table, and under declared reach with the workload allowed, among 1,000
// guarded ports. The time is the client's own, without its start.
func BenchmarkDeclaredReachConnect(b *testing.B) {
	for _, declared := range []bool{false, true} {
		b.Run(map[bool]string{false: "off", true: "declared"}[declared], func(b *testing.B) {
			run := benchReach(b, declared)
			took := run("connect", b.N)
			b.ReportMetric(float64(took.Nanoseconds())/float64(b.N), "ns/conn")
			b.ReportMetric(float64(b.N)/took.Seconds(), "conns/s")
		})
	}
}

// BenchmarkDeclaredReachThroughput is 256 KiB sent by a workload's process
// over one connection to an endpoint of its namespace, off and declared.
func BenchmarkDeclaredReachThroughput(b *testing.B) {
	for _, declared := range []bool{false, true} {
		b.Run(map[bool]string{false: "off", true: "declared"}[declared], func(b *testing.B) {
			run := benchReach(b, declared)
			const chunk = 256 << 10
			b.SetBytes(chunk)
			took := run("stream", b.N*chunk)
			b.ReportMetric(float64(b.N)*chunk/took.Seconds()/1e6, "MB/s-client")
		})
	}
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
