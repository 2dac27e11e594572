package engine

import (
	"math/rand/v2"
	"sync"
)

// What becomes deliverable reaches its group here. deliverable decides
// whether a group can be served a partition now; notify (after a commit, an
// ack, a lease or retry delay ending, a visibility timer) puts the
// partition on the group's ready list, which pops take from the front of
// (popReady), and takes off the group's waiter list a parked pop that wants
// it; wake retries those pops once every lock is released. A waiter is a
// parked long poll (below).

// deliverable reports whether g can be handed messages of p now; when only
// time stands in the way, it arms p's timer. Caller holds p's stripe.
func (e *Engine) deliverable(p *partition, pg *pgState) bool {
	if pg.cursor >= p.durable {
		return false
	}
	if a := pg.act; a != nil && (a.lease != nil || a.blockedUntil != 0) {
		return false
	}
	end, wakeAt := e.visibleEnd(p)
	if pg.cursor < end {
		return true
	}
	if wakeAt > 0 {
		e.armPartition(p, wakeAt)
	}
	return false
}

// notify tells g that p may have become deliverable: it joins g's ready list
// and a parked pop that wants it is woken (appended to wakes, to be run once
// every lock is released). Caller holds p's stripe.
func (e *Engine) notify(p *partition, g *group, pg *pgState, wakes *[]*waiter) {
	if !e.deliverable(p, pg) {
		relax(pg)
		return
	}
	a := e.active(p, g, pg)
	add := !a.inReady
	a.inReady = true
	g.mu.Lock()
	if g.deleted.Load() {
		g.mu.Unlock()
		return
	}
	if add {
		g.pushReady(a)
	}
	g.version++
	if w := g.takeWaiter(p.name); w != nil {
		*wakes = append(*wakes, w)
	}
	g.mu.Unlock()
	if e.labelWaiting.Load() > 0 {
		e.wakeLabels(p.q, wakes)
	}
}

// The ready list: partitions with deliverable messages for the group, in
// FIFO order, lazily validated. Guarded by g.mu.

func (g *group) pushReady(a *pgActive) {
	if g.rhead > 0 && g.rhead >= len(g.ready)/2 {
		n := copy(g.ready, g.ready[g.rhead:])
		clear(g.ready[n:])
		g.ready = g.ready[:n]
		g.rhead = 0
	}
	g.ready = append(g.ready, a)
}

// unpopReady puts back at the front of the ready list a partition that
// popReady handed out and that was then not served (its journal record was
// refused), so the list is exactly as it was.
func (g *group) unpopReady(a *pgActive) {
	if g.rhead > 0 {
		g.rhead--
		g.ready[g.rhead] = a
		return
	}
	g.ready = append(g.ready, nil)
	copy(g.ready[1:], g.ready)
	g.ready[0] = a
}

func (g *group) popReady() *pgActive {
	if g.rhead >= len(g.ready) {
		return nil
	}
	a := g.ready[g.rhead]
	g.ready[g.rhead] = nil
	g.rhead++
	if g.rhead == len(g.ready) {
		g.ready = g.ready[:0]
		if cap(g.ready) > 4096 {
			g.ready = nil // a drained burst gives its memory back
		}
		g.rhead = 0
	}
	return a
}

// A waiter is a parked long poll. It sits in its group's waiter list until a
// change that may make messages deliverable to it (a commit, a lease ending,
// a retry delay running out) takes it off the list and retries it, or until
// its deadline fires in a timer wheel. Its mutex orders those three.
type waiter struct {
	e        *Engine
	c        *popCall
	mu       sync.Mutex
	finished bool
	timer    timer
	st       *stripe // whose wheel holds the timer
}

// readVersion returns the group's change counter; a pop that finds nothing
// parks only if it has not moved since.
func (g *group) readVersion() uint64 {
	g.mu.Lock()
	v := g.version
	g.mu.Unlock()
	return v
}

// takeWaiter removes and returns the first waiter that wants partition pname.
// Caller holds g.mu.
func (g *group) takeWaiter(pname string) *waiter {
	for i, w := range g.waiters {
		if w.c.req.Partition == "" || w.c.req.Partition == pname {
			copy(g.waiters[i:], g.waiters[i+1:])
			g.waiters[len(g.waiters)-1] = nil
			g.waiters = g.waiters[:len(g.waiters)-1]
			return w
		}
	}
	return nil
}

func (g *group) dropWaiter(w *waiter) {
	g.mu.Lock()
	for i, x := range g.waiters {
		if x == w {
			copy(g.waiters[i:], g.waiters[i+1:])
			g.waiters[len(g.waiters)-1] = nil
			g.waiters = g.waiters[:len(g.waiters)-1]
			break
		}
	}
	g.mu.Unlock()
}

// arm schedules the waiter's deadline. w.mu is held.
func (w *waiter) arm() {
	w.st = &w.e.stripes[rand.Uint64()&w.e.smask]
	w.st.mu.Lock()
	w.st.wheel.schedule(&w.timer, w.c.deadline, w)
	w.st.mu.Unlock()
}

// finish marks the waiter answered and disarms its deadline. w.mu is held.
func (w *waiter) finish() {
	w.finished = true
	w.st.mu.Lock()
	w.st.wheel.cancel(&w.timer)
	w.st.mu.Unlock()
}

// loop parks the waiter, or answers it when there is something to answer.
// With again it first tries the pop. It reports whether the waiter finished.
// w.mu is held.
func (w *waiter) loop(ver uint64, again bool) bool {
	e, c := w.e, w.c
	for {
		if again {
			ver = e.version(c)
			msgs, pend, err := e.attempt(c)
			if err != nil || len(msgs) > 0 {
				w.finish()
				e.deliver(c, msgs, pend, err)
				return true
			}
		}
		again = true
		if e.clock.Now() >= c.deadline {
			w.finish()
			c.done(nil, false, nil)
			return true
		}
		if c.absent {
			if e.parkAbsent(w, ver) {
				return false
			}
			continue
		}
		if c.byLabels() {
			if e.parkLabels(w, ver) {
				return false
			}
			continue
		}
		c.g.mu.Lock()
		if c.g.deleted.Load() {
			c.g.mu.Unlock()
			w.finish()
			c.done(nil, false, nil)
			return true
		}
		if c.g.version == ver {
			c.g.waiters = append(c.g.waiters, w)
			c.g.mu.Unlock()
			return false
		}
		c.g.mu.Unlock()
	}
}

// retry runs when a change took the waiter off its group's list.
func (w *waiter) retry() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.finished {
		w.loop(0, true)
	}
}

// fire is the deadline: queued to run after the wheel's lock is released.
func (w *waiter) fire(f *wheelFire) { f.after = append(f.after, w.timeout) }

func (w *waiter) timeout() {
	w.mu.Lock()
	if w.finished {
		w.mu.Unlock()
		return
	}
	w.finished = true
	w.mu.Unlock()
	w.unpark()
	w.c.done(nil, false, nil)
}

// unpark takes the waiter off whichever list it waits in.
func (w *waiter) unpark() {
	if w.c.absent {
		w.e.dropAbsentWaiter(w)
		return
	}
	if w.c.byLabels() {
		w.e.dropLabelWaiter(w)
		return
	}
	w.c.g.dropWaiter(w)
}

func (w *waiter) cancel() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.finished {
		return false
	}
	w.finish()
	w.unpark()
	return true
}

// wake retries woken waiters. Each runs on its own goroutine: wakes come
// from the journal's committer and from timers, which must not run pops.
func (e *Engine) wake(ws []*waiter) {
	for _, w := range ws {
		go w.retry()
	}
}

// failWaiters answers every parked pop of g with err (nil: empty).
func (e *Engine) failWaiters(g *group, err error) {
	g.mu.Lock()
	ws := g.waiters
	g.waiters = nil
	g.mu.Unlock()
	for _, w := range ws {
		w.mu.Lock()
		if !w.finished {
			w.finish()
			w.c.done(nil, false, err)
		}
		w.mu.Unlock()
	}
}
