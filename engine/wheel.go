package engine

import (
	"sync"
	"time"
)

// The engine's time: the clock it reads (Clock, below; tests move a
// FakeClock by hand) and the wheel its timers wait on.
//
// A hashed timer wheel: O(1) schedule and cancel, no goroutine and no
// allocation per timer. Timers are intrusive (a timer field inside the lease,
// the partition-group state or the waiter that owns it). Each stripe owns one
// wheel and touches it only under the stripe's lock; a ticker advances all of
// them.

// timerFirer is what a timer calls when it expires. It runs under the lock of
// the wheel's owner.
type timerFirer interface {
	fire(w *wheelFire)
}

// timer is a node of the wheel. The zero value is an unscheduled timer.
type timer struct {
	next, prev *timer
	when       int64 // tick at which it expires
	owner      timerFirer
}

func (t *timer) scheduled() bool { return t.next != nil }

// wheel is a single-level hashed wheel whose slots hold timers expiring at
// ticks congruent to the slot; timers further out than one turn stay in their
// slot and are skipped until their tick comes.
type wheel struct {
	tickNanos int64
	cur       int64 // last tick processed
	slots     []timer
	mask      int64
	count     int
	due       []*timer
}

func (w *wheel) init(tickNanos int64, nslots int, now int64) {
	w.tickNanos = tickNanos
	w.slots = make([]timer, nslots)
	for i := range w.slots {
		s := &w.slots[i]
		s.next, s.prev = s, s
	}
	w.mask = int64(nslots - 1)
	w.cur = now / tickNanos
}

// schedule arms t to expire at the first tick at or after atNanos (a timer
// already armed is moved).
func (w *wheel) schedule(t *timer, atNanos int64, owner timerFirer) {
	w.unlink(t)
	tick := (atNanos + w.tickNanos - 1) / w.tickNanos
	if tick <= w.cur {
		tick = w.cur + 1
	}
	t.when = tick
	t.owner = owner
	head := &w.slots[tick&w.mask]
	t.prev = head.prev
	t.next = head
	head.prev.next = t
	head.prev = t
	w.count++
}

// cancel disarms t; cancelling an unarmed timer does nothing. A timer that
// is due but not yet fired in the current advance does not fire.
func (w *wheel) cancel(t *timer) {
	t.owner = nil
	w.unlink(t)
}

func (w *wheel) unlink(t *timer) {
	if !t.scheduled() {
		return
	}
	t.prev.next = t.next
	t.next.prev = t.prev
	t.next, t.prev = nil, nil
	w.count--
}

// wheelFire collects what expiring timers want done after the wheel's lock
// is released (waking waiters, answering timed-out polls).
type wheelFire struct {
	e     *Engine
	now   int64
	after []func()
}

// advance fires every timer whose tick is at or before now's tick.
func (w *wheel) advance(now int64, f *wheelFire) {
	target := now / w.tickNanos
	if target <= w.cur {
		return
	}
	from := w.cur + 1
	if target-from > w.mask { // more than one turn: every slot is visited once
		from = target - w.mask
	}
	w.cur = target
	if w.count == 0 {
		return
	}
	due := w.due[:0]
	for tick := from; tick <= target; tick++ {
		head := &w.slots[tick&w.mask]
		for t := head.next; t != head; {
			nx := t.next
			if t.when <= target {
				w.unlink(t)
				due = append(due, t)
			}
			t = nx
		}
	}
	// Fire after collecting: a firing timer may cancel or re-arm others.
	for i, t := range due {
		due[i] = nil
		o := t.owner
		if o == nil || t.scheduled() {
			continue
		}
		t.owner = nil
		o.fire(f)
	}
	w.due = due[:0]
}

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
