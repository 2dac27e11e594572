package engine

import (
	"sync"
	"time"
)

// Clock tells the engine the time. The engine reads it for timestamps, lease
// expiry, retry delays and long-poll timeouts; tests pass a *FakeClock and
// move time by hand.
type Clock interface {
	// Now returns the current time as Unix nanoseconds.
	Now() int64
}

type realClock struct{}

func (realClock) Now() int64 { return time.Now().UnixNano() }

// FakeClock is a Clock that moves only when told to. Safe for concurrent use.
type FakeClock struct {
	mu  sync.Mutex
	now int64
}

// NewFakeClock returns a FakeClock set to t.
func NewFakeClock(t time.Time) *FakeClock { return &FakeClock{now: t.UnixNano()} }

// Now implements Clock.
func (c *FakeClock) Now() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *FakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now += int64(d)
	c.mu.Unlock()
}
