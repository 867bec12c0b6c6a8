// Command probe is the program the real-node tier's pods run (a static binary alone in
// its image):
//
//	probe sleep             wait for SIGTERM, then exit 0 at once
//	probe gomaxprocs [ms]   print "gomaxprocs N" at start and whenever the runtime's
//	                        GOMAXPROCS changes (checked every ms milliseconds, default 200)
//	probe burn N            keep N goroutines busy until SIGTERM
//	probe pace MILLICORES   use exactly MILLICORES of CPU (at most 1000) until SIGTERM:
//	                        a thread that spends its CPU a millisecond at a time and
//	                        sleeps whenever it is ahead of MILLICORES x the time since it
//	                        started, so a CPU it was denied is taken back as soon as it
//	                        can run, and what it used shows whether it got what it asked
//	probe cat FILE...       print files (the container's own view, through exec)
//	probe serve PORT        answer each line "N" on a TCP connection to PORT with "ok"
//	                        once N ms of the thread's own CPU time are spent, so what a
//	                        request costs does not depend on how fast the (emulated) CPU
//	                        is, nor on how long it waited for one
//	probe load HOST:PORT MS SECONDS RATE@SECONDS[,RATE@SECONDS...]
//	                        an open-loop load generator: for SECONDS, send "MS" to the
//	                        server on a fixed schedule (each phase's rate per second for
//	                        its length, the phases cycled), whether or not earlier requests
//	                        have been answered; prints "start", then, once all are in, a
//	                        line per request, "<scheduled ms> <latency ms> <answered>",
//	                        latency counted from the scheduled instant as wrk2 does, so a
//	                        stalled server's queue shows in it
//
// Go 1.25 and later size GOMAXPROCS from the cgroup's CPU limit and update it while
// running, which is what `gomaxprocs` shows.
package main

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

func terminated() <-chan os.Signal {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	return stop
}

func gomaxprocs(interval time.Duration) {
	stop := terminated()
	last := -1
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		if now := runtime.GOMAXPROCS(0); now != last {
			fmt.Printf("gomaxprocs %d\n", now)
			last = now
		}
		select {
		case <-stop:
			return
		case <-tick.C:
		}
	}
}

func burn(workers int) {
	for i := 0; i < workers; i++ {
		go func() {
			for n := uint64(0); ; n++ {
				_ = n * n
			}
		}()
	}
	<-terminated()
}

// clockThreadCPUTimeID is Linux's CLOCK_THREAD_CPUTIME_ID.
const clockThreadCPUTimeID = 3

func threadCPU() time.Duration {
	var ts syscall.Timespec
	_, _, errno := syscall.Syscall(
		syscall.SYS_CLOCK_GETTIME, clockThreadCPUTimeID, uintptr(unsafe.Pointer(&ts)), 0)
	if errno != 0 {
		panic(errno)
	}
	return time.Duration(ts.Nano())
}

var sink uint64

// spend burns cost of the calling thread's CPU time: time spent throttled or waiting
// for a CPU does not count, so every request costs the same CPU under any limit.
func spend(cost time.Duration) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	end := threadCPU() + cost
	x := sink
	for threadCPU() < end {
		for i := 0; i < 2000; i++ {
			x = x*6364136223846793005 + 1442695040888963407
		}
	}
	sink = x
}

// serve answers, on every connection, each line "<ms>" with "ok" once it has spent
// that many milliseconds of CPU: a line protocol rather than HTTP, whose parsing would
// cost the emulated guest more CPU than the work itself.
func serve(port string) {
	listener, err := net.Listen("tcp", ":"+port)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	go func() {
		for {
			conn, err := listener.Accept()
			if err != nil {
				return
			}
			go answer(conn)
		}
	}()
	<-terminated()
	listener.Close()
}

func answer(conn net.Conn) {
	defer conn.Close()
	lines := bufio.NewScanner(conn)
	for lines.Scan() {
		ms, err := strconv.Atoi(lines.Text())
		if err != nil || ms < 0 {
			fmt.Fprintln(conn, "error: a request is a whole number of milliseconds")
			continue
		}
		spend(time.Duration(ms) * time.Millisecond)
		if _, err := fmt.Fprintln(conn, "ok"); err != nil {
			return
		}
	}
}

type phase struct {
	rate    float64 // requests per second
	seconds float64
}

func parsePhases(text string) []phase {
	var phases []phase
	for _, part := range strings.Split(text, ",") {
		rate, length, found := strings.Cut(part, "@")
		r, err1 := strconv.ParseFloat(rate, 64)
		s, err2 := strconv.ParseFloat(length, 64)
		if !found || err1 != nil || err2 != nil || r <= 0 || s <= 0 {
			usage()
		}
		phases = append(phases, phase{rate: r, seconds: s})
	}
	return phases
}

// schedule is every request's offset from the start: each phase's rate, evenly spaced,
// the phases cycled until seconds.
func schedule(seconds float64, phases []phase) []time.Duration {
	var offsets []time.Duration
	for begin := 0.0; begin < seconds; {
		for _, p := range phases {
			for at := begin; at < begin+p.seconds && at < seconds; at += 1 / p.rate {
				offsets = append(offsets, time.Duration(at*float64(time.Second)))
			}
			begin += p.seconds
		}
	}
	return offsets
}

// client is one connection to the server with its reader: a request waits for its
// answer on it, so requests in flight together each hold a connection of the pool.
type client struct {
	conn  net.Conn
	lines *bufio.Reader
}

func ask(pool chan *client, address, request string) bool {
	var c *client
	select {
	case c = <-pool:
	default:
		conn, err := net.DialTimeout("tcp", address, 10*time.Second)
		if err != nil {
			return false
		}
		c = &client{conn: conn, lines: bufio.NewReader(conn)}
	}
	c.conn.SetDeadline(time.Now().Add(60 * time.Second))
	_, err := fmt.Fprintln(c.conn, request)
	var answer string
	if err == nil {
		answer, err = c.lines.ReadString('\n')
	}
	if err != nil || answer != "ok\n" {
		c.conn.Close()
		return false
	}
	select {
	case pool <- c:
	default:
		c.conn.Close()
	}
	return true
}

func load(address, request string, seconds float64, phases []phase) {
	offsets := schedule(seconds, phases)
	lines := make([]string, len(offsets))
	pool := make(chan *client, 1024)
	var wg sync.WaitGroup
	fmt.Println("start")
	start := time.Now()
	for i, offset := range offsets {
		time.Sleep(time.Until(start.Add(offset)))
		wg.Add(1)
		go func(i int, offset time.Duration) {
			defer wg.Done()
			ok := ask(pool, address, request)
			latency := time.Since(start.Add(offset))
			lines[i] = fmt.Sprintf("%.3f %.3f %t", offset.Seconds()*1000,
				latency.Seconds()*1000, ok)
		}(i, offset)
	}
	wg.Wait()
	fmt.Println(strings.Join(lines, "\n"))
}

func pace(millicores int) {
	stop := terminated()
	runtime.LockOSThread()
	start, used := time.Now(), threadCPU()
	share := float64(millicores) / 1000
	for {
		select {
		case <-stop:
			return
		default:
		}
		owed := time.Duration(float64(time.Since(start))*share) - (threadCPU() - used)
		if owed > 0 {
			spend(min(owed, time.Millisecond))
		} else {
			time.Sleep(-owed)
		}
	}
}

func cat(paths []string) int {
	code := 0
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
			continue
		}
		os.Stdout.Write(data)
	}
	return code
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: probe sleep | gomaxprocs [ms] | burn N | pace MILLICORES | cat FILE... | "+
		"serve PORT | load HOST:PORT MS SECONDS RATE@SECONDS[,RATE@SECONDS...]")
	os.Exit(2)
}

func number(args []string, fallback int) int {
	if len(args) == 0 {
		return fallback
	}
	n, err := strconv.Atoi(args[0])
	if err != nil || n <= 0 {
		usage()
	}
	return n
}

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	args := os.Args[2:]
	switch os.Args[1] {
	case "sleep":
		<-terminated()
	case "gomaxprocs":
		gomaxprocs(time.Duration(number(args, 200)) * time.Millisecond)
	case "burn":
		burn(number(args, 1))
	case "pace":
		millicores := number(args, 0)
		if millicores > 1000 {
			usage()
		}
		pace(millicores)
	case "cat":
		os.Exit(cat(args))
	case "serve":
		if len(args) != 1 {
			usage()
		}
		serve(args[0])
	case "load":
		if len(args) != 4 {
			usage()
		}
		seconds, err := strconv.ParseFloat(args[2], 64)
		if err != nil || seconds <= 0 {
			usage()
		}
		load(args[0], strconv.Itoa(number(args[1:2], 0)), seconds, parsePhases(args[3]))
	default:
		usage()
	}
}
