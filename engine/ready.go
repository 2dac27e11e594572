package engine

import (
	"math/rand/v2"
	"sort"
	"sync"
)

// What becomes deliverable reaches its group here. deliverable decides
// whether a group can be served a partition now; notify (after a commit, an
// ack, a lease or retry delay ending, a visibility timer) puts the
// partition on the group's ready list, which pops take from the front of
// (popReady), and takes off the group's waiter list a parked pop that wants
// it; wake retries those pops once every lock is released. A waiter is a
// parked long poll (below). Further down, the two other questions of what
// a group may be given: how much a queue still holds for its consumers
// (depth, which maxSize caps), and when a message becomes visible
// (delayedProcessing, windowBuffer).

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

// Queue depth: the messages of a queue that are still to be done, counted
// from each partition's slowest group (from its oldest message when the
// queue has no group yet). maxSize caps it: a push that would go past it is
// refused for that item. Each partition remembers where its pending
// messages start (pendFrom), and the queue keeps the sum of next - pendFrom,
// adjusted whenever a partition's slowest cursor moves.

// pendingFrom is where p's pending messages start. Caller holds p's stripe.
func (p *partition) pendingFrom() uint64 {
	if min, any := p.minCursor(); any {
		return max(min, p.low())
	}
	return p.low()
}

// refreshDepth re-reads p's slowest cursor and moves the queue's depth by
// the difference. Caller holds p's stripe.
func (e *Engine) refreshDepth(p *partition) {
	from := min(p.pendingFrom(), p.next)
	if from != p.pendFrom {
		p.q.depth.Add(int64(p.pendFrom) - int64(from))
		p.pendFrom = from
	}
}

// reserve takes room for one message in q under maxSize; it reports false
// when the queue is full.
func (q *queue) reserve(maxSize int64) bool {
	if q.depth.Add(1) > maxSize {
		q.depth.Add(-1)
		return false
	}
	return true
}

// Depth is how many messages of the named queue are still to be done by its
// slowest group.
func (e *Engine) Depth(name string) (int64, error) {
	q := e.queue(name)
	if q == nil {
		return 0, ErrQueueNotFound
	}
	return q.depth.Load(), nil
}

// Visibility options: delayedProcessing (a message is not deliverable until
// createdAt + delay; the messages after it in its partition wait behind it,
// so order holds) and windowBuffer (a partition is served only once its
// newest message is that old, so that a burst comes out as one batch). Both
// are driven by a timer per partition in its stripe's wheel: when the time
// comes, the partition's groups are told, as a commit would tell them.

// visibleEnd is the end of the messages of p a consumer may take now:
// the durable ones, minus those still inside the delay, and none while the
// window holds the partition back. wakeAt, when not 0, is when that changes.
// Caller holds p's stripe.
func (e *Engine) visibleEnd(p *partition) (end uint64, wakeAt int64) {
	o := p.q.options()
	end = p.durable
	if o.DelayedProcessing <= 0 && o.WindowBuffer <= 0 {
		return end, 0
	}
	now := e.clock.Now()
	if w := int64(o.WindowBuffer); w > 0 && p.lastTS+w > now && end > p.low() {
		return 0, p.lastTS + w
	}
	if d := int64(o.DelayedProcessing); d > 0 {
		cut := now - d
		i := sort.Search(len(p.chunks), func(i int) bool { return p.chunks[i].ts > cut })
		if i < len(p.chunks) && p.chunks[i].first < end {
			end = p.chunks[i].first
			wakeAt = p.chunks[i].ts + d
		}
	}
	return end, wakeAt
}

// ptimer wakes a partition's groups when delayed messages become visible or
// its window passes.
type ptimer struct {
	t timer
	p *partition
}

func (e *Engine) armPartition(p *partition, at int64) {
	if p.tm == nil {
		p.tm = &ptimer{p: p}
	}
	if p.tm.t.scheduled() && p.tm.t.when*int64(e.cfg.TimerTick) <= at {
		return // armed for sooner: firing re-arms it for what is left
	}
	p.st().wheel.schedule(&p.tm.t, at, p.tm)
}

func (pt *ptimer) fire(f *wheelFire) {
	e, p := f.e, pt.p
	if p.q.deleted.Load() {
		return
	}
	var wakes []*waiter
	for _, g := range p.q.groupList() {
		if g != nil {
			e.notify(p, g, e.pgFor(p, g), &wakes)
		}
	}
	if len(wakes) > 0 {
		f.after = append(f.after, func() { e.wake(wakes) })
	}
}
