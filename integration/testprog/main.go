// Command testprog is the workload the integration tests give flyd to run.
// Each subcommand is one behaviour a test needs to observe from the outside:
//
//	serve ADDR             HTTP server; GET / answers its pid; "got SIGTERM" then exit 0 on SIGTERM
//	get ADDR               prints the answer to GET http://ADDR/, or fails
//	dial ADDR EVERY        connects to the TCP address ADDR every EVERY, forever, and
//	                       prints each outcome that differs from the last: "dial ok",
//	                       "dial refused after Nus", "dial failed after Nus: ERR"
//	udp ADDR               sends "ping" to the UDP address ADDR and prints the answer;
//	                       fails when none comes within a second
//	hog                    allocates and touches memory, 8 MiB at a time, forever
//	forkbomb               starts sleeping copies of itself as fast as it can, forever
//	print N                N numbered lines on stdout and stderr, interleaved, then sleep
//	count                  print "count N" for N = 1, 2, ... one a millisecond, forever
//	numbered RATE          print "n N" for N = 1, 2, ... RATE lines a second, forever
//	hostile                on its stdout, every 100 ms: clear O_APPEND, seek to 300 MiB
//	                       and to a few TB, ftruncate and fallocate far out, write two
//	                       bytes at each; between those, write 64 KiB blocks of lines
//	                       as fast as it can, forever
//	longline MB            one line of MB mebibytes, its newline, then sleep
//	exit CODE              print a line, exit with CODE
//	ignore-term            ignore SIGTERM, sleep
//	spawn-group N PIDFILE  start N children in its process group that ignore SIGTERM,
//	                       write their pids to PIDFILE, sleep; exit 0 on SIGTERM
//	spawn-escapee PIDFILE  start a child in a new session (setsid), write its pid, sleep
//	env                    print ids, cwd and the sorted environment, then sleep
//	signals                print every SIGHUP, SIGUSR1, SIGUSR2 it gets; exit 0 on SIGTERM
//	flood SOCKET N HOLD [REQ]  open up to N connections to SOCKET, send each REQ (events:
//	                       follow the events; slowapply: an apply whose body never
//	                       comes), print how many were answered 200, 403, 503, closed
//	                       without an answer or held silent for 2 s; hold them for
//	                       HOLD, exit
//	listen SOCKET          listen on a Unix socket, print "listening", then "received N bytes"
//	                       for each connection (what a client sent before closing or 1 s)
//	notify DELAY           after DELAY, send "READY=1" and "STATUS=serving" to $NOTIFY_SOCKET,
//	                       print "notified", sleep
//	pidlock FILE           as postgres does with postmaster.pid: refuse to start (exit 1)
//	                       while the pid in FILE is alive, else write its own pid
//	                       there, start a child in its process group, sleep
//
// Everything it prints goes unbuffered to stdout or stderr, so a line is in
// the workload's log as soon as it is printed.
package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Body is what serve answers after its pid line.
const Body = "hello from testprog"

func main() {
	if len(os.Args) < 2 {
		fail("usage: testprog MODE [ARGS]")
	}
	args := os.Args[2:]
	switch os.Args[1] {
	case "serve":
		need(args, 1)
		serve(args[0])
	case "print":
		need(args, 1)
		n := atoi(args[0])
		for i := 1; i <= n; i++ {
			fmt.Fprintf(os.Stdout, "stdout line %d\n", i)
			fmt.Fprintf(os.Stderr, "stderr line %d\n", i)
		}
		sleep()
	case "numbered":
		need(args, 1)
		numbered(atoi(args[0]))
	case "hostile":
		hostile()
	case "longline":
		need(args, 1)
		block := []byte(strings.Repeat("x", 1<<20))
		for i := 0; i < atoi(args[0]); i++ {
			os.Stdout.Write(block)
		}
		os.Stdout.Write([]byte("\n"))
		sleep()
	case "count":
		for i := 1; ; i++ {
			fmt.Printf("count %d\n", i)
			time.Sleep(time.Millisecond)
		}
	case "exit":
		need(args, 1)
		code := atoi(args[0])
		fmt.Printf("exiting with code %d\n", code)
		os.Exit(code)
	case "ignore-term":
		signal.Ignore(syscall.SIGTERM)
		fmt.Println("ignoring SIGTERM")
		sleep()
	case "spawn-group":
		need(args, 2)
		spawnGroup(atoi(args[0]), args[1])
	case "spawn-escapee":
		need(args, 1)
		spawn(args[0], &syscall.SysProcAttr{Setsid: true}, "ignore-term")
		fmt.Println("spawned an escapee")
		sleep()
	case "env":
		printEnv()
		sleep()
	case "parent":
		// Starts ARGS as a child told SIGTERM when this process dies,
		// prints its pid, and waits to be killed.
		need(args, 1)
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
		if err := cmd.Start(); err != nil {
			fail(err.Error())
		}
		fmt.Println("child", cmd.Process.Pid)
		_ = cmd.Wait()
	case "env-then-get":
		// The environment, then what the address one variable of it
		// holds answers: a consumer dialling what it was given.
		need(args, 1)
		printEnv()
		get(os.Getenv(args[0]))
	case "signals":
		signals()
	case "flood":
		need(args, 3)
		hold, err := time.ParseDuration(args[2])
		if err != nil {
			fail(err.Error())
		}
		req := ""
		if len(args) > 3 {
			req = floodRequests[args[3]]
		}
		flood(args[0], atoi(args[1]), hold, req)
	case "listen":
		need(args, 1)
		listen(args[0])
	case "notify":
		need(args, 1)
		d, err := time.ParseDuration(args[0])
		if err != nil {
			fail(err.Error())
		}
		time.Sleep(d)
		c, err := net.Dial("unixgram", os.Getenv("NOTIFY_SOCKET"))
		if err != nil {
			fail(err.Error())
		}
		if _, err := c.Write([]byte("READY=1\nSTATUS=serving")); err != nil {
			fail(err.Error())
		}
		c.Close()
		fmt.Println("notified")
		sleep()
	case "pidlock":
		need(args, 1)
		pidlock(args[0])
	case "get":
		need(args, 1)
		get(args[0])
	case "dial":
		need(args, 2)
		every, err := time.ParseDuration(args[1])
		if err != nil {
			fail(err.Error())
		}
		dial(args[0], every)
	case "udp":
		need(args, 1)
		udp(args[0])
	case "hog":
		hog()
	case "forkbomb":
		forkbomb()
	default:
		fail("unknown mode " + os.Args[1])
	}
}

// get prints what GET http://ADDR/ answers, or fails: the tests run it
// inside a network through `flyd exec`. ADDR may be a URL already, as
// codefly gives an HTTP endpoint's address.
func get(addr string) {
	if !strings.HasPrefix(addr, "http://") {
		addr = "http://" + addr
	}
	resp, err := http.Get(addr + "/")
	if err != nil {
		fail(err.Error())
	}
	defer resp.Body.Close()
	_, _ = io.Copy(os.Stdout, resp.Body)
}

// dial connects to addr again and again, as a client that calls a
// dependency does, saying how each attempt went when it changed.
func dial(addr string, every time.Duration) {
	last := ""
	for {
		start := time.Now()
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		took := time.Since(start).Microseconds()
		var now string
		switch {
		case err == nil:
			c.Close()
			now = "dial ok"
		case errors.Is(err, syscall.ECONNREFUSED):
			now = fmt.Sprintf("dial refused after %dus", took)
		default:
			now = fmt.Sprintf("dial failed after %dus: %v", took, err)
		}
		if head, _, _ := strings.Cut(now, " after"); head != last {
			fmt.Println(now)
			last = head
		}
		time.Sleep(every)
	}
}

// udp sends one datagram to addr and prints the first answer: a refusal
// (an ICMP error on the connected socket) or silence fails.
func udp(addr string) {
	c, err := net.Dial("udp", addr)
	if err != nil {
		fail(err.Error())
	}
	defer c.Close()
	if _, err := c.Write([]byte("ping")); err != nil {
		fail(err.Error())
	}
	_ = c.SetReadDeadline(time.Now().Add(time.Second))
	b := make([]byte, 512)
	n, err := c.Read(b)
	if err != nil {
		fail(err.Error())
	}
	fmt.Println(string(b[:n]))
}

func hog() {
	var kept [][]byte
	for {
		b := make([]byte, 8<<20)
		for i := range b {
			b[i] = byte(i)
		}
		kept = append(kept, b)
		fmt.Printf("holding %d MiB\n", 8*len(kept))
	}
}

func forkbomb() {
	started, refused := 0, 0
	for {
		if err := exec.Command(os.Args[0], "ignore-term").Start(); err != nil {
			refused++
		} else {
			started++
		}
		if (started+refused)%50 == 0 {
			fmt.Printf("started %d, refused %d\n", started, refused)
		}
	}
}

func serve(addr string) {
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	go func() {
		<-term
		fmt.Println("got SIGTERM")
		os.Exit(0)
	}()
	http.HandleFunc("GET /", func(w http.ResponseWriter, r *http.Request) {
		fmt.Printf("request %s %s from %s\n", r.Method, r.URL.Path, r.RemoteAddr)
		fmt.Fprintf(w, "pid=%d\n%s\n", os.Getpid(), Body)
	})
	fmt.Printf("serving on %s\n", addr)
	fail(http.ListenAndServe(addr, nil).Error())
}

func spawnGroup(n int, pidfile string) {
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	var pids []string
	for range n {
		pids = append(pids, strconv.Itoa(start(nil, "ignore-term")))
	}
	writePids(pidfile, pids)
	fmt.Printf("spawned %d children in my process group\n", n)
	<-term
	fmt.Println("got SIGTERM, leaving my children behind")
	os.Exit(0)
}

// spawn starts one child of this program and records its pid.
func spawn(pidfile string, attr *syscall.SysProcAttr, mode string) {
	writePids(pidfile, []string{strconv.Itoa(start(attr, mode))})
}

// start re-executes this program in mode. Its argv[0] is ours, so the tests
// recognise the child in /proc as one of theirs.
func start(attr *syscall.SysProcAttr, mode string) int {
	cmd := exec.Command("/proc/self/exe", mode)
	cmd.Args[0] = os.Args[0]
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.SysProcAttr = attr
	if err := cmd.Start(); err != nil {
		fail(err.Error())
	}
	return cmd.Process.Pid
}

// writePids writes the file whole and then renames it, so a test that sees
// the file sees every pid.
func writePids(path string, pids []string) {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(strings.Join(pids, "\n")+"\n"), 0o644); err != nil {
		fail(err.Error())
	}
	if err := os.Rename(tmp, path); err != nil {
		fail(err.Error())
	}
}

func printEnv() {
	groups, _ := os.Getgroups()
	gs := make([]string, len(groups))
	for i, g := range groups {
		gs[i] = strconv.Itoa(g)
	}
	fmt.Printf("ids uid=%d gid=%d groups=%s\n", os.Getuid(), os.Getgid(), strings.Join(gs, ","))
	if wd, err := os.Getwd(); err == nil {
		fmt.Println("cwd " + wd)
	}
	env := os.Environ()
	slices.Sort(env)
	for _, kv := range env {
		fmt.Println("env " + kv)
	}
	fmt.Println("end of env")
}

func signals() {
	ch := make(chan os.Signal, 4)
	signal.Notify(ch, syscall.SIGHUP, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGTERM)
	fmt.Println("waiting for signals")
	names := map[os.Signal]string{syscall.SIGHUP: "SIGHUP", syscall.SIGUSR1: "SIGUSR1",
		syscall.SIGUSR2: "SIGUSR2", syscall.SIGTERM: "SIGTERM"}
	for s := range ch {
		fmt.Printf("got %s\n", names[s])
		if s == syscall.SIGTERM {
			os.Exit(0)
		}
	}
}

// sleep blocks forever; a bare select{} would be reported as a deadlock.
func sleep() {
	for {
		time.Sleep(time.Hour)
	}
}

func need(args []string, n int) {
	if len(args) < n {
		fail(fmt.Sprintf("%s needs %d argument(s)", os.Args[1], n))
	}
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		fail(err.Error())
	}
	return n
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, "testprog: "+msg)
	os.Exit(111)
}

// pidlock is a forking master guarding its data with a pid file: a pid
// that still exists (kill 0 succeeds, a zombie included) means another
// master may be running.
func pidlock(file string) {
	if b, err := os.ReadFile(file); err == nil {
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid != os.Getpid() && syscall.Kill(pid, 0) == nil {
			fmt.Printf("lock file %s already exists: is another instance (pid %d) running?\n", file, pid)
			os.Exit(1)
		}
	}
	writePids(file, []string{strconv.Itoa(os.Getpid())})
	start(nil, "ignore-term")
	fmt.Println("holding the lock")
	sleep()
}

// flood opens connections to a Unix socket without sending a request, as a
// client that means to exhaust the server's descriptors would, and reports
// what the server answered on each.
// floodRequests are what flood may send on each connection.
var floodRequests = map[string]string{
	"events":    "GET /v1/events HTTP/1.1\r\nHost: flyd\r\n\r\n",
	"slowapply": "POST /v1/batch/apply HTTP/1.1\r\nHost: flyd\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{",
}

func flood(socket string, n int, hold time.Duration, req string) {
	var conns []net.Conn
	for range n {
		c, err := net.Dial("unix", socket)
		if err != nil {
			break // our own descriptors, or the server's backlog
		}
		if req != "" {
			_, _ = io.WriteString(c, req)
		}
		conns = append(conns, c)
	}
	var mu sync.Mutex
	counts := map[string]int{}
	var wg sync.WaitGroup
	deadline := time.Now().Add(2 * time.Second)
	for _, c := range conns {
		wg.Go(func() {
			_ = c.SetReadDeadline(deadline)
			b := make([]byte, 12)
			n, err := io.ReadFull(c, b)
			var k string
			switch ne, ok := err.(net.Error); {
			case n == 12:
				k = string(b[9:12])
			case ok && ne.Timeout():
				k = "silent" // held open, unanswered
			default:
				k = "closed"
			}
			mu.Lock()
			counts[k]++
			mu.Unlock()
		})
	}
	wg.Wait()
	fmt.Printf("opened %d 200 %d 403 %d 503 %d closed %d silent %d\n", len(conns), counts["200"], counts["403"], counts["503"], counts["closed"], counts["silent"])
	time.Sleep(hold)
}

// listen stands in for a daemon that is not flyd, to see what a client
// tells it.
func listen(socket string) {
	l, err := net.Listen("unix", socket)
	if err != nil {
		fail(err.Error())
	}
	_ = os.Chmod(socket, 0o666)
	fmt.Println("listening")
	for {
		c, err := l.Accept()
		if err != nil {
			fail(err.Error())
		}
		_ = c.SetReadDeadline(time.Now().Add(time.Second))
		n, _ := io.Copy(io.Discard, c)
		c.Close()
		fmt.Printf("received %d bytes\n", n)
	}
}

// numbered prints rate numbered lines a second, in batches a millisecond
// apart, each line one write.
func numbered(rate int) {
	per := max(rate/1000, 1)
	next := time.Now()
	for n := 1; ; {
		for range per {
			fmt.Fprintf(os.Stdout, "n %d\n", n)
			n++
		}
		next = next.Add(time.Millisecond)
		time.Sleep(time.Until(next))
	}
}

// hostile does to its stdout what a workload writing its log file
// directly could do to fill the disk, and floods it between the games.
func hostile() {
	fd := int(os.Stdout.Fd())
	block := []byte(strings.Repeat("y\n", 32<<10))
	last := time.Time{}
	for {
		if time.Since(last) > 100*time.Millisecond {
			last = time.Now()
			if fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0); err == nil {
				_, _ = unix.FcntlInt(uintptr(fd), unix.F_SETFL, fl&^unix.O_APPEND)
			}
			for _, off := range []int64{300 << 20, 3 << 40} {
				if _, err := unix.Seek(fd, off, 0); err == nil {
					_, _ = unix.Write(fd, []byte("z\n"))
				}
			}
			_ = unix.Ftruncate(fd, 5<<40)
			_ = unix.Fallocate(fd, 0, 0, 1<<30)
			_, _ = unix.Pwrite(fd, []byte("p\n"), 7<<40)
		}
		if _, err := unix.Write(fd, block); err != nil {
			time.Sleep(time.Millisecond)
		}
	}
}
