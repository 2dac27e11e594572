package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
)

// popCall is a normalized PopRequest with its queue and group resolved
// (q and g are nil for a pop by namespace and task: see labels.go; and for
// a long poll on a queue that does not exist yet, which is absent: see
// absent.go).
type popCall struct {
	req      PopRequest
	q        *queue
	g        *group
	absent   bool // waiting for its queue to come into being
	started  int64
	done     func([]Message, bool, error)
	deadline int64
	// The attempt running (attempts of one call never overlap: a waiter's
	// lock orders them): the byte budget left, and whether it cut the
	// answer short.
	left int
	cut  bool
}

func (c *popCall) byLabels() bool { return c.q == nil && !c.absent }

// PopWaiter is a parked long poll; Cancel withdraws it.
type PopWaiter struct{ w *waiter }

// Cancel withdraws a parked pop (its client went away). It reports whether
// the pop was still parked; if not, done has run or is about to.
func (pw *PopWaiter) Cancel() bool {
	if pw == nil || pw.w == nil {
		return false
	}
	return pw.w.cancel()
}

// PopAsync hands out up to req.Batch messages, within req.MaxBytes; done
// runs once with them (an empty slice is a normal answer), and cut when the
// byte budget left out messages that were ready. With req.Wait the pop
// parks until it can answer or its timeout passes; the returned PopWaiter
// (nil when done already ran or will run without parking) can cancel it.
// done runs on this goroutine or another; it must not block.
func (e *Engine) PopAsync(req PopRequest, done func(msgs []Message, cut bool, err error)) *PopWaiter {
	c, err := e.newPopCall(req, done)
	if err != nil {
		done(nil, false, err)
		return nil
	}
	if c == nil { // no such queue, no wait
		done(nil, false, nil)
		return nil
	}
	ver := e.version(c)
	msgs, pend, err := e.attempt(c)
	if err != nil || len(msgs) > 0 || !req.Wait {
		e.deliver(c, msgs, pend, err)
		return nil
	}
	// About to park: a later answer goes into memory of its own, so that
	// the caller has Buf back now (see PopRequest.Buf), and the pop keeps
	// its names beyond this call, so they are the engine's own. Both before
	// the waiter is visible to the goroutines that retry it.
	c.req.Buf = nil
	c.req.Queue, c.req.Partition, c.req.Group = own(c.req.Queue), own(c.req.Partition), own(c.req.Group)
	c.req.Namespace, c.req.Task = own(c.req.Namespace), own(c.req.Task)
	w := &waiter{e: e, c: c}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.arm()
	if w.loop(ver, false) {
		return nil
	}
	return &PopWaiter{w}
}

// Pop is PopAsync for callers that can block; ctx cancels a parked pop.
func (e *Engine) Pop(ctx context.Context, req PopRequest) ([]Message, error) {
	type answer struct {
		msgs []Message
		err  error
	}
	ch := make(chan answer, 1)
	pw := e.PopAsync(req, func(m []Message, _ bool, err error) { ch <- answer{m, err} })
	select {
	case a := <-ch:
		return a.msgs, a.err
	case <-ctx.Done():
		if pw.Cancel() {
			return nil, ctx.Err()
		}
		a := <-ch
		return a.msgs, a.err
	}
}

func (e *Engine) newPopCall(req PopRequest, done func([]Message, bool, error)) (*popCall, error) {
	if err := e.check(); err != nil {
		return nil, err
	}
	if req.Group == "" {
		req.Group = QueueModeGroup
	}
	if req.Batch <= 0 {
		req.Batch = 1
	}
	if req.Batch > e.cfg.MaxPopBatch {
		return nil, fmt.Errorf("%w: batch %d is above the limit of %d", ErrInvalid, req.Batch, e.cfg.MaxPopBatch)
	}
	if req.Partitions <= 0 {
		req.Partitions = 1
	}
	if req.MaxBytes <= 0 || req.MaxBytes > e.cfg.MaxPopBytes {
		req.MaxBytes = e.cfg.MaxPopBytes
	}
	if req.Partition != "" {
		req.Partitions = 1
	}
	if req.Timeout < 0 {
		return nil, fmt.Errorf("%w: negative timeout", ErrInvalid)
	}
	if req.Timeout == 0 {
		req.Timeout = e.cfg.DefaultPopTimeout
	}
	if req.Timeout > e.cfg.MaxPopTimeout {
		req.Timeout = e.cfg.MaxPopTimeout
	}
	if req.Queue == "" && (req.Namespace != "" || req.Task != "") {
		if req.Partition != "" {
			return nil, fmt.Errorf("%w: a pop by namespace or task takes no partition", ErrInvalid)
		}
		if err := checkName("consumer group", req.Group, false); err != nil {
			return nil, err
		}
		return &popCall{req: req, done: done, deadline: e.clock.Now() + int64(req.Timeout)}, nil
	}
	if err := checkName("queue", req.Queue, true); err != nil {
		return nil, err
	}
	if req.Partition != "" {
		if err := checkName("partition", req.Partition, false); err != nil {
			return nil, err
		}
		if e.cfg.Route != nil {
			if err := e.routeName(req.Queue, req.Partition); err != nil {
				return nil, err
			}
		}
	}
	if err := checkName("consumer group", req.Group, false); err != nil {
		return nil, err
	}
	q := e.queue(req.Queue)
	if q == nil {
		if !req.Wait {
			return nil, nil
		}
		// A consumer that starts before any producer waits for the queue,
		// creating nothing (absent.go).
		return &popCall{req: req, absent: true, started: e.newStamp(), done: done, deadline: e.clock.Now() + int64(req.Timeout)}, nil
	}
	var from int64
	if req.Subscription == SubFrom {
		from = req.From.UnixNano()
	}
	g, err := e.groupOrCreate(q, req.Group, req.Subscription, from)
	if err != nil {
		return nil, err
	}
	return &popCall{req: req, q: q, g: g, done: done, deadline: e.clock.Now() + int64(req.Timeout)}, nil
}

// deliver answers a pop: at once, or (autoAck, or leases journaled) when
// its records are durable.
func (e *Engine) deliver(c *popCall, msgs []Message, pend *pending, err error) {
	cut := c.cut
	if pend == nil {
		c.done(msgs, cut, err)
		return
	}
	pend.fn = func(jerr error) {
		if jerr != nil {
			c.done(nil, false, jerr)
			return
		}
		c.done(msgs, cut, err)
	}
	pend.finish()
}

// attempt leases what it can for c without waiting. For autoAck pops the
// returned pending (not yet finished) completes when the cursor moves are
// durable.
func (e *Engine) attempt(c *popCall) ([]Message, *pending, error) {
	if err := e.check(); err != nil {
		return nil, nil, err
	}
	if c.absent {
		if ok, err := e.resolveAbsent(c); !ok || err != nil {
			return nil, nil, err
		}
	}
	if c.byLabels() {
		return e.attemptLabels(c)
	}
	if c.q.deleted.Load() {
		return nil, nil, fmt.Errorf("%w: %q", ErrQueueNotFound, c.q.name)
	}
	c.left, c.cut = c.req.MaxBytes, false
	now := e.clock.Now()
	var set *leaseSet
	if !c.req.AutoAck {
		set = &leaseSet{id: e.ids.next(now)}
	}
	var pend *pending
	if c.req.AutoAck || e.cfg.JournalLeases {
		pend = newPending(nil)
	}
	out := c.req.Buf[:0]
	var wakes []*waiter
	var firstErr error
	// Partitions whose next message this pop's budget can never hold (a
	// client with small frames): they go back behind the others, once the
	// pop is over, so that the others are served.
	var tooLarge []*pgActive
	// serve takes from p if it is deliverable, reading messages that are
	// no longer in memory from the journal first, with the stripe's lock
	// released (a replay must not stall the stripe's producers). p's stripe
	// is held on entry and on return; it reports whether it took.
	serve := func(p *partition) bool {
		var cold []coldChunk
		for warmed := false; ; warmed = true {
			pg := e.pgFor(p, c.g)
			if p.lost > 0 {
				e.skipLost(p, pg) // damage.go
			}
			if !e.deliverable(p, pg) {
				relax(pg)
				return false
			}
			if !warmed {
				if cold = e.coldChunks(p, pg.cursor, uint64(c.req.Batch-len(out))); len(cold) > 0 {
					p.st().mu.Unlock()
					e.warm(p, cold, c.left)
					p.st().mu.Lock()
					continue // everything may have changed: look again
				}
			}
			if len(cold) > 0 {
				// Read back for this pop only: over the cache's budget they
				// leave memory again once taken (the answer holds what it
				// needs), so a lagging group never grows the cache.
				defer e.coolDown(p, cold)
			}
			n := len(out)
			var err error
			out, err = e.take(p, c, pg, now, set, pend, out, &wakes)
			// A partition whose messages cannot be read back (damage.go)
			// fails a pop of that partition alone: a pop of any partition
			// serves the others (it was logged and counted).
			if err != nil && firstErr == nil && (c.req.Partition != "" || !errors.Is(err, ErrUnreadable)) {
				firstErr = err
			}
			if a := pg.act; errors.Is(err, ErrTooLarge) && c.req.Partition == "" && a != nil && !a.inReady {
				a.inReady = true
				tooLarge = append(tooLarge, a)
			}
			return len(out) > n
		}
	}
	if c.req.Partition != "" {
		if p := c.q.partition(c.req.Partition); p != nil {
			p.st().mu.Lock()
			serve(p)
			p.st().mu.Unlock()
		}
	} else {
		for parts := 0; parts < c.req.Partitions && len(out) < c.req.Batch && !c.cut; {
			c.g.mu.Lock()
			a := c.g.popReady()
			c.g.mu.Unlock()
			if a == nil {
				break
			}
			p := a.p
			p.st().mu.Lock()
			if a.g.idx < len(p.groups) && p.groups[a.g.idx].act == a {
				a.inReady = false
				if serve(p) {
					parts++
				}
			}
			p.st().mu.Unlock()
		}
	}
	if len(tooLarge) > 0 {
		c.g.mu.Lock()
		for _, a := range tooLarge {
			c.g.pushReady(a)
		}
		c.g.mu.Unlock()
	}
	if set != nil && len(set.leases) > 0 {
		e.leases.add(set)
	}
	e.wake(wakes)
	if len(out) > 0 {
		e.countPop(c.q, out, now, c.req.AutoAck) // autoAck: completed on delivery
	}
	if len(out) == 0 && pend != nil {
		pend = nil // nothing was appended: its hold count is 1 and nothing waits on it
	}
	if len(out) > 0 {
		// What was taken is answered: a partition that failed (its error
		// logged, nothing of it changed) must not make the answer an error,
		// or the messages taken from the others would be lost to autoAck or
		// left leased to nobody.
		firstErr = nil
	}
	return out, pend, firstErr
}

// take hands g the next messages of p (up to what c still wants), under a new
// lease or (autoAck) by moving the cursor. Caller holds p's stripe and has
// checked that p is deliverable.
func (e *Engine) take(p *partition, c *popCall, pg *pgState, now int64, set *leaseSet, pend *pending, out []Message, wakes *[]*waiter) ([]Message, error) {
	from := pg.cursor
	to, _ := e.visibleEnd(p)
	if want := uint64(c.req.Batch - len(out)); to-from > want {
		to = from + want
	}
	if p.lost > 0 {
		if to = p.beforeLost(from, to); to == from {
			return out, nil // lost messages only: skipLost passes them (damage.go)
		}
	}
	to, err := e.fitBudget(p, c, from, to, len(out) == 0)
	if err != nil {
		return out, err // attempt puts p back, behind the others
	}
	if to == from {
		e.putBack(p, c, pg) // nothing of p fits what is left of the budget
		return out, nil
	}
	// A pooled buffer, not one on the stack: 13 KiB of stack made the
	// goroutines that run pops (woken long polls start on fresh ones) grow
	// their stacks, and fresh stack memory page-faults.
	buf := msgBufs.Get().(*[128]msg)
	defer func() {
		clear(buf[:]) // keep no payloads alive
		msgBufs.Put(buf)
	}()
	ms, err := e.msgsRange(p, from, to, buf[:0])
	if err != nil {
		e.log.Error("pop: cannot read messages", "queue", p.q.name, "partition", p.name, "err", err)
		return out, err
	}
	// Open every payload before anything changes. A message that does not
	// open (no key given opens it) is an error for that message alone: at
	// the cursor it goes to this group's dead-letter queue with the reason,
	// with the unreadable ones right after it, and the partition goes on;
	// further on, the answer stops before it (it is at the cursor next).
	start := len(out)
	if cap(out)-len(out) < len(ms) {
		// One allocation for this partition's run (not one per power of
		// two), and at least doubling across the partitions of a pop.
		out = slices.Grow(out, max(len(ms), len(out)))
	}
	tombs := p.q.tombsOf(p)
	ids := idText{n: len(ms), bare: c.req.BareTxn}
	for i := 0; i < len(ms); i++ {
		off := from + uint64(i)
		if len(tombs) > 0 && p.q.tombstoned(p, off) {
			continue // deleted: passed as done (below), never delivered
		}
		msg, err := e.message(p, off, &ms[i], &ids)
		if err == nil {
			msg.Group = c.g.name
			out = append(out, msg)
			continue
		}
		if !errors.Is(err, ErrEncryption) {
			e.log.Error("pop: cannot open a message", "queue", p.q.name, "partition", p.name, "err", err)
			return out[:start], err
		}
		if len(out) > start {
			c.left += budgetOf(p, ms[i:])
			ms, to = ms[:i], off
			break
		}
		k, derr := e.deadUnreadable(p, c.g, pg, from, ms, i, err, now)
		if derr != nil {
			e.putBack(p, c, pg)
			return out[:start], derr
		}
		c.left += budgetOf(p, ms[:k])
		from += uint64(k)
		ms = ms[k:]
		i = -1
	}
	if len(ms) == 0 { // all of it went to the dead-letter queue
		e.notify(p, c.g, pg, wakes) // what follows may be deliverable
		return out, nil
	}
	var l *lease
	a := pg.act
	if c.req.AutoAck {
		// Journal the moved cursor first: if the journal refuses it, nothing
		// changed, and p goes back on the group's ready list.
		ef := effect{queueID: p.q.id, seq: p.seq, group: c.g.name, cursor: to}
		if a != nil {
			ef.retries, ef.blockedUntil = retriesFrom(a.retries, to), a.blockedUntil
		}
		if e.cfg.JournalLeases {
			ef.withLease, ef.lease = true, leaseRecOf(pg)
		}
		if _, err := e.appendHeld(appendEffect(make([]byte, 0, 64+len(c.g.name)+4*len(ef.retries)), &ef), pend); err != nil {
			e.putBack(p, c, pg)
			return out[:start], err
		}
		pg.cursor = to
		if a != nil {
			a.dropRetriesBelow(to)
		}
	} else {
		a = e.active(p, c.g, pg)
		l = &lease{id: set.id, p: p, gidx: c.g.idx, from: from, to: to, status: make([]uint8, to-from), set: set}
		if c.req.AcksByName && uint64(len(ms)) == to-from {
			e.keepNames(l, ms)
		}
		for _, t := range tombs {
			if t >= from && t < to {
				l.status[t-from] = stCompleted
				l.nDone++
			}
		}
		prev := pg.cursor
		advanceCursor(pg, l) // deleted messages at the front are passed at once
		l.expires = now + int64(c.q.options().LeaseTime)
		prevLease := a.lease
		a.lease = l
		if e.cfg.JournalLeases {
			// The grant is a record (pg's state, its new lease included),
			// and the pop is answered once it is durable; refused, nothing
			// changed.
			if _, err := e.appendHeld(e.effectRecord(p, c.g, pg, nil), pend); err != nil {
				pg.cursor, a.lease = prev, prevLease
				e.dropNames(l)
				relax(pg)
				e.putBack(p, c, pg)
				return out[:start], err
			}
		}
		p.st().wheel.schedule(&l.timer, l.expires, l)
		set.leases = append(set.leases, l)
		if l.nDone == len(l.status) { // only deleted messages: nothing to wait for
			e.endLease(p, pg, l, wakes)
			e.notify(p, c.g, pg, wakes)
		}
	}
	for i := start; i < len(out); i++ {
		msg := &out[i]
		if l != nil {
			msg.LeaseID = l.id
			msg.LeaseExpires = l.expires
		}
		if a != nil {
			msg.RetryCount = int(a.retryCount(msg.Offset))
		}
	}
	if c.req.AutoAck {
		relax(pg)
		e.shrinkTail(p, false)
		// The cursor moved: what is left may be deliverable to others.
		e.notify(p, c.g, pg, wakes)
	}
	return out, nil
}

// deadUnreadable files the message ms[i] (at offset from+i) that does not
// open (why) to g's dead-letter queue, with every message after it that
// does not open either, and moves g's cursor past them (and past the deleted
// ones among and before them): one effect record, applied once the journal
// took it. It returns how many of ms the cursor passed; on the journal's
// refusal nothing changed. Caller holds p's stripe; pg's cursor is at from.
func (e *Engine) deadUnreadable(p *partition, g *group, pg *pgState, from uint64, ms []msg, i int, why error, now int64) (int, error) {
	a := pg.act
	entry := func(k int, why error) deadEntry {
		off := from + uint64(k)
		retries := 0
		if a != nil {
			retries = int(a.retryCount(off))
		}
		return deadEntry{id: e.ids.next(now), off: off, retries: retries, failedAt: now, err: why.Error(), m: ms[k]}
	}
	dead := []deadEntry{entry(i, why)}
	k := i + 1
	for ; k < len(ms); k++ {
		if p.q.tombstoned(p, from+uint64(k)) {
			continue
		}
		_, err := e.open(&ms[k])
		if err == nil {
			break
		}
		dead = append(dead, entry(k, err))
	}
	cursor := from + uint64(k)
	ef := effect{queueID: p.q.id, seq: p.seq, group: g.name, cursor: cursor, dead: dead}
	if a != nil {
		ef.retries, ef.blockedUntil = retriesFrom(a.retries, cursor), a.blockedUntil
	}
	if e.cfg.JournalLeases {
		ef.withLease, ef.lease = true, leaseRecOf(pg)
	}
	size := 64 + len(g.name) + 4*len(ef.retries)
	for i := range dead {
		size += 96 + len(dead[i].err) + len(dead[i].m.txn) + len(dead[i].m.trace) + len(dead[i].m.sub) + len(dead[i].m.payload)
	}
	if _, err := e.append(appendEffect(make([]byte, 0, size), &ef), nil); err != nil {
		return 0, err
	}
	pg.cursor = cursor
	if a != nil {
		a.dropRetriesBelow(cursor)
	}
	e.fileDead(p, g, dead)
	for _, d := range dead {
		e.log.Warn("a message that no key given opens went to the dead-letter queue", "queue", p.q.name, "partition", p.name,
			"offset", d.off, "group", g.name, "reason", d.err)
	}
	e.shrinkTail(p, false)
	return k, nil
}

// budgetOf is what ms take of a pop's byte budget (see fitBudget).
func budgetOf(p *partition, ms []msg) int {
	n := 0
	for i := range ms {
		n += msgBytes(len(ms[i].payload), len(ms[i].txn), len(ms[i].trace), len(p.name), len(ms[i].sub))
	}
	return n
}

// putBack returns p to the front of the group's ready list, where attempt
// took it from, when the pop then took nothing of it: the list is as it was.
// Caller holds p's stripe.
func (e *Engine) putBack(p *partition, c *popCall, pg *pgState) {
	if a := pg.act; c.req.Partition == "" && a != nil && !a.inReady {
		a.inReady = true
		c.g.mu.Lock()
		c.g.unpopReady(a)
		c.g.mu.Unlock()
	}
}

// fitBudget returns the end of the messages [from, to) of p that fit what
// is left of c's byte budget (counting them off it), cutting c short when
// one does not. The pop's first message (first) is refused with ErrTooLarge
// when it is larger than the whole budget (a client whose frames are too
// small for it cannot take it; nothing is taken). A chunk not in memory
// (warm read up to the budget) is read back under the lock only for the
// pop's first message; otherwise the answer stops before it. Caller holds
// p's stripe.
func (e *Engine) fitBudget(p *partition, c *popCall, from, to uint64, first bool) (uint64, error) {
	for ci := p.chunkFor(from); ci >= 0 && ci < len(p.chunks) && from < to; ci++ {
		ch := &p.chunks[ci]
		if ch.mem == nil {
			if !first {
				c.cut = true
				return from, nil
			}
			pr, err := e.readChunk(p, ch)
			if err != nil {
				e.log.Error("pop: cannot read messages", "queue", p.q.name, "partition", p.name, "err", err)
				return from, err
			}
			e.cacheChunk(p, ci, pr)
		}
		m := ch.mem
		end := min(p.chunkEnd(ci), to)
		for ; from < end; from++ {
			r := &m.refs[from-ch.first]
			n := msgBytes(int(r.payLen), int(r.txnLen), int(r.traceLen), len(p.name), len(m.sub))
			if n > c.left {
				if first {
					return from, fmt.Errorf("%w: message %s/%s %d takes %d bytes, above this pop's budget of %d (the client's frame size)",
						ErrTooLarge, p.q.name, p.name, from, n, c.req.MaxBytes)
				}
				c.cut = true
				return from, nil
			}
			c.left -= n
			first = false
		}
	}
	return to, nil
}

// retriesFrom is the part of rs (sorted by offset) at or after cursor.
func retriesFrom(rs []retryCount, cursor uint64) []retryCount {
	k := 0
	for k < len(rs) && rs[k].off < cursor {
		k++
	}
	return rs[k:]
}

// countPop counts msgs popped from q at now; autoAck counts them acked too
// (completed on delivery).
func (e *Engine) countPop(q *queue, msgs []Message, now int64, autoAck bool) {
	n := uint64(len(msgs))
	e.stats.popped.Add(n)
	q.flow.popped.Add(n)
	if autoAck {
		e.stats.acked.Add(n)
		q.flow.acked.Add(n)
	}
	e.stats.lag.add(msgs, now)
	q.flow.lag.add(msgs, now)
}
