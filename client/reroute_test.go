package client

import (
	"context"
	"testing"
	"time"
)

// A request answered misrouted is sent again at once routeAttempts-1
// times, then after pauses until misroutedWait has passed, and not after.
func TestRerouteBudget(t *testing.T) {
	ctx := context.Background()
	rr := newReroute()
	for i := 1; i < routeAttempts; i++ {
		start := time.Now()
		if !rr.more() || rr.wait(ctx) != nil {
			t.Fatalf("sending %d refused", i)
		}
		if took := time.Since(start); took > 20*time.Millisecond {
			t.Fatalf("sending %d waited %v: the first ones go at once", i, took)
		}
	}
	start := time.Now()
	if !rr.more() || rr.wait(ctx) != nil || time.Since(start) < 25*time.Millisecond {
		t.Fatal("no pause after the first sendings")
	}
	rr.start = time.Now().Add(-misroutedWait)
	if rr.more() {
		t.Fatal("sent again after misroutedWait")
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if rr.wait(cctx) == nil {
		t.Fatal("a pause outlived its context")
	}
}
