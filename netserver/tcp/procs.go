package tcp

import (
	"os"
	"runtime"
	"sync"
)

// gnet's event loops wait in epoll_wait as plain system calls, not through
// Go's network poller, and a goroutine in a system call keeps its P until
// the runtime's monitor hands the P off (20 µs to 10 ms later). With
// GOMAXPROCS equal to the cores, loops that block between bursts leave the
// goroutines they woke (journal committer, reply callbacks, other clients in
// the process) runnable with no P to run on: pop round trips measured 0.8 ms
// at the median with the CPU half idle. So each running server adds one P
// per loop; the loops are asleep in the kernel most of that time, so the
// cores are not oversubscribed by it. (BENCHMARKS.md, "GOMAXPROCS".)
var procs struct {
	sync.Mutex
	base  int // GOMAXPROCS before the first reservation
	extra int
}

// reserveProcs raises GOMAXPROCS by n until release is called, unless the
// GOMAXPROCS environment variable fixes it.
func reserveProcs(n int) (release func()) {
	if n <= 0 || procsFixedByEnv() {
		return func() {}
	}
	procs.Lock()
	if procs.extra == 0 {
		procs.base = runtime.GOMAXPROCS(0)
	}
	procs.extra += n
	runtime.GOMAXPROCS(procs.base + procs.extra)
	procs.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			procs.Lock()
			procs.extra -= n
			runtime.GOMAXPROCS(procs.base + procs.extra)
			procs.Unlock()
		})
	}
}

// procsFixedByEnv reports whether the GOMAXPROCS environment variable fixes
// the Ps (reserveProcs then adds none).
func procsFixedByEnv() bool { return os.Getenv("GOMAXPROCS") != "" }
