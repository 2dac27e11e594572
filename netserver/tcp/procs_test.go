package tcp

import (
	"os"
	"runtime"
	"testing"
)

// TestReserveProcs: each reservation adds its Ps, releases give them back
// (once each, in any order), and the base is what GOMAXPROCS was.
func TestReserveProcs(t *testing.T) {
	if os.Getenv("GOMAXPROCS") != "" {
		t.Skip("GOMAXPROCS is fixed by the environment")
	}
	base := runtime.GOMAXPROCS(0)
	r1 := reserveProcs(2)
	if got := runtime.GOMAXPROCS(0); got != base+2 {
		t.Fatalf("after reserving 2: %d, want %d", got, base+2)
	}
	r2 := reserveProcs(3)
	if got := runtime.GOMAXPROCS(0); got != base+5 {
		t.Fatalf("after reserving 3 more: %d, want %d", got, base+5)
	}
	r1()
	r1() // a second release changes nothing
	if got := runtime.GOMAXPROCS(0); got != base+3 {
		t.Fatalf("after releasing 2: %d, want %d", got, base+3)
	}
	r2()
	if got := runtime.GOMAXPROCS(0); got != base {
		t.Fatalf("after releasing all: %d, want %d", got, base)
	}
	t.Setenv("GOMAXPROCS", "1")
	reserveProcs(4)()
	if got := runtime.GOMAXPROCS(0); got != base {
		t.Fatalf("with GOMAXPROCS set: %d, want %d untouched", got, base)
	}
}
