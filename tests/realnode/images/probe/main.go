// Command probe is the program the real-node tier's pods run (a static binary alone in
// its image):
//
//	probe sleep             wait for SIGTERM, then exit 0 at once
//	probe gomaxprocs [ms]   print "gomaxprocs N" at start and whenever the runtime's
//	                        GOMAXPROCS changes (checked every ms milliseconds, default 200)
//	probe burn N            keep N goroutines busy until SIGTERM
//	probe cat FILE...       print files (the container's own view, through exec)
//
// Go 1.25 and later size GOMAXPROCS from the cgroup's CPU limit and update it while
// running, which is what `gomaxprocs` shows.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"syscall"
	"time"
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
	fmt.Fprintln(os.Stderr, "usage: probe sleep | gomaxprocs [ms] | burn N | cat FILE...")
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
	case "cat":
		os.Exit(cat(args))
	default:
		usage()
	}
}
