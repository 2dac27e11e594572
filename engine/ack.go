package engine

import (
	"context"
	"fmt"
	"sync"
)

// AckAsync applies acks in order and fills res (len(res) >= len(items)).
// done runs once every change is durable; a refused ack is not an error of
// the call (its res entry says why). When the journal refuses the record of
// some acks (the acks of one partition and group make one record), those
// acks are answered with the reason and nothing of them is kept; when it
// refuses every record of the call, the call fails with that error.
func (e *Engine) AckAsync(items []AckItem, res []AckResult, done func(error)) {
	if err := e.check(); err != nil {
		done(err)
		return
	}
	if len(res) < len(items) {
		done(fmt.Errorf("%w: result slice shorter than items", ErrInvalid))
		return
	}
	if e.cfg.Route != nil {
		if err := e.routeAcks(items); err != nil {
			done(err)
			return
		}
	}
	pend := newPending(done)
	var refused error
	kept := false
	for i := 0; i < len(items); {
		j := i + 1
		for j < len(items) && items[j].PartitionID == items[i].PartitionID && items[j].Group == items[i].Group {
			j++
		}
		appended, jerr := e.ackRun(items[i:j], res[i:j], pend)
		kept = kept || appended
		if jerr != nil && refused == nil {
			refused = jerr
		}
		i = j
	}
	if refused != nil && !kept {
		done(refused) // nothing of the call was kept
		return
	}
	pend.finish()
}

// Ack is AckAsync for callers that can block.
func (e *Engine) Ack(ctx context.Context, items []AckItem) ([]AckResult, error) {
	res := make([]AckResult, len(items))
	ch := make(chan error, 1)
	e.AckAsync(items, res, func(err error) { ch <- err })
	select {
	case err := <-ch:
		return res, err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// resolveAckTarget finds the partition and group an ack names.
func (e *Engine) resolveAckTarget(it *AckItem) (*partition, *group, error) {
	p := e.partitionByID(it.PartitionID)
	if p == nil {
		return nil, nil, fmt.Errorf("%w: no partition %s", ErrMessageNotFound, it.PartitionID)
	}
	name := it.Group
	if name == "" {
		name = QueueModeGroup
	}
	g := p.q.group(name)
	if g == nil {
		return nil, nil, fmt.Errorf("%w: %s has never read queue %q", ErrNotInFlight, groupLabel(name), p.q.name)
	}
	if it.Status < Completed || it.Status > DLQ {
		return nil, nil, fmt.Errorf("%w: unknown ack status %d", ErrInvalid, it.Status)
	}
	return p, g, nil
}

// ackRun applies the acks of one partition and group as one effect record,
// or as several when the dead letters they file (each with its message's
// payload) pass Config.MaxRecordBytes: a record is written each time they
// do. It reports whether it journaled any, and the journal's refusal when it
// refused one: the acks of that record and of the rest of the run are then
// answered with it, and everything they changed is put back as it was
// (cursor, lease, retry counts, delay; their dead-letter entries are not
// filed).
func (e *Engine) ackRun(items []AckItem, res []AckResult, pend *pending) (bool, error) {
	p, g, err := e.resolveAckTarget(&items[0])
	if err != nil {
		for i := range res {
			res[i] = AckResult{Err: err}
		}
		return false, nil
	}
	st := p.st()
	st.mu.Lock()
	defer st.mu.Unlock()
	pg := e.pgFor(p, g)
	now := e.clock.Now()
	before := save(pg)
	changed, kept := false, false
	var refused error
	var dead []deadEntry
	deadBytes, start := 0, 0
	var cache leaseMsgs
	defer cache.release()
	for i := range items {
		r := &res[i]
		*r = AckResult{Queue: p.q.name, Partition: p.name}
		n := len(dead)
		c, err := e.ackOne(p, g, pg, &items[i], now, r, &dead, &cache)
		r.Err = err
		changed = changed || c
		for k := n; k < len(dead); k++ {
			deadBytes += len(dead[k].m.payload) + len(dead[k].err)
		}
		if !changed || (i < len(items)-1 && deadBytes < e.cfg.MaxRecordBytes) {
			continue
		}
		if _, err := e.appendHeld(e.effectRecord(p, g, pg, dead), pend); err != nil {
			before.restore()
			for k := start; k < len(items); k++ {
				res[k] = AckResult{Err: err, Queue: p.q.name, Partition: p.name}
			}
			refused = err
			break
		}
		if len(dead) > 0 {
			e.fileDead(p, g, dead)
		}
		e.countAcks(p.q, items[start:i+1])
		kept = true
		if i < len(items)-1 {
			before, changed, dead, deadBytes, start = save(pg), false, nil, 0, i+1
		}
	}
	if !kept {
		return false, refused
	}
	var wakes []*waiter
	e.settle(p, g, pg, now, &wakes)
	// The wakes are retried on other goroutines: safe under the lock.
	e.wake(wakes)
	return true, refused
}

// ackOne checks one ack against pg's lease and applies it to the lease's
// states, the retry counts, the block and the cursor. It reports whether
// state changed. Ending the lease, timers, the dead-letter queue and the
// journal are left to the caller (so a transaction can undo).
func (e *Engine) ackOne(p *partition, g *group, pg *pgState, it *AckItem, now int64, r *AckResult, dead *[]deadEntry, cache *leaseMsgs) (bool, error) {
	var l *lease
	if pg.act != nil {
		l = pg.act.lease
	}
	live := l != nil && !l.released
	want := wantStatus(it.Status)
	if it.LeaseID.IsZero() {
		if !e.cfg.UncheckedAcks {
			return false, fmt.Errorf("%w: name the lease the pop returned (the server checks leases)", ErrLeaseRequired)
		}
		if !live {
			return false, fmt.Errorf("%w: no live lease of %s on %s/%s", ErrNotInFlight, groupLabel(g.name), p.q.name, p.name)
		}
	} else if !live || l.id != it.LeaseID || (it.live && l.expires <= now) {
		if it.live {
			return false, fmt.Errorf("%w: lease %s is not the live lease of %s on %s/%s", ErrLeaseInvalid, it.LeaseID, groupLabel(g.name), p.q.name, p.name)
		}
		old := p.st().ended.get(it.LeaseID, p)
		if l != nil && l.id == it.LeaseID {
			old = l
		}
		if old != nil {
			if off, ok := e.findInLease(p, old, it, cache); ok && old.statusAt(off)&^stDeadFlag == want {
				r.Offset = off
				r.LeaseReleased = true
				r.DeadLettered = old.statusAt(off)&stDeadFlag != 0
				return false, nil // repeated: it took effect before
			}
		}
		return false, fmt.Errorf("%w: lease %s is not the live lease of %s on %s/%s", ErrLeaseInvalid, it.LeaseID, groupLabel(g.name), p.q.name, p.name)
	}
	off, ok := e.findInLease(p, l, it, cache)
	if !ok {
		return false, fmt.Errorf("%w: the message is not in lease %s", ErrNotInFlight, l.id)
	}
	r.Offset = off
	i := off - l.from
	if s := l.status[i]; s != stNone {
		if s&^stDeadFlag == want {
			r.DeadLettered = s&stDeadFlag != 0
			return false, nil
		}
		return false, fmt.Errorf("%w: it was acked %s", ErrAlreadyAcked, statusName(s))
	}
	a := pg.act
	opts := p.q.options()
	switch it.Status {
	case Completed:
		l.status[i] = stCompleted
		l.nDone++
	case DLQ:
		l.status[i] = stDead | stDeadFlag
		l.nDone++
		*dead = append(*dead, e.deadFor(p, off, int(a.retryCount(off)), now, it.Error))
		r.DeadLettered = true
	case FailedAck:
		n := a.retryCount(off) + 1
		l.released = true
		if int(n) > opts.RetryLimit {
			l.status[i] = stFailed | stDeadFlag
			l.nDone++
			*dead = append(*dead, e.deadFor(p, off, int(n-1), now, it.Error))
			r.DeadLettered = true
		} else {
			l.status[i] = stFailed
			a.setRetries(off, n)
			if opts.RetryDelay > 0 {
				a.blockedUntil = now + int64(opts.RetryDelay)
			}
		}
	case Retry:
		l.status[i] = stRetry
		l.released = true
	}
	advanceCursor(pg, l)
	a.dropRetriesBelow(pg.cursor)
	r.LeaseReleased = l.released || l.nDone == len(l.status)
	return true, nil
}

// leaseMsgs caches the messages of the lease an ack run looks into, so that
// a batch of acks naming messages by id or transactionId reads them once.
type leaseMsgs struct {
	l    *lease
	ms   []msg
	next int       // acks usually come in delivery order: look from the last match
	buf  *[128]msg // from msgBufs, taken when an ack first needs the messages
	// The same for a lease whose names it holds (nothing to read).
	named    *lease
	nameNext int
}

var msgBufs = sync.Pool{New: func() any { return new([128]msg) }}

// release gives the buffer back (call once the run is over).
func (c *leaseMsgs) release() {
	if c.buf != nil {
		clear(c.buf[:]) // keep no payloads alive
		msgBufs.Put(c.buf)
		c.buf, c.ms, c.l = nil, nil, nil
	}
}

// findInLease resolves the message an ack names to an offset inside l.
func (e *Engine) findInLease(p *partition, l *lease, it *AckItem, c *leaseMsgs) (uint64, bool) {
	if it.HasOffset {
		return it.Offset, it.Offset >= l.from && it.Offset < l.to
	}
	if it.MessageID.IsZero() && it.TransactionID == "" {
		return 0, false
	}
	// A message pushed without a transactionId is named by its id's
	// canonical text; idText says the ack's transactionId is such a text
	// (of id).
	id, byID, idText := it.MessageID, !it.MessageID.IsZero(), false
	if !byID {
		id, idText = canonicalUUID(it.TransactionID)
	}
	if l.names != nil {
		if c.named != l {
			c.named, c.nameNext = l, 0
		}
		for n := range l.names {
			i := (c.nameNext + n) % len(l.names)
			if l.names[i].named(byID, id, idText, it.TransactionID) {
				c.nameNext = i + 1
				return l.from + uint64(i), true
			}
		}
		return 0, false
	}
	if c.l != l {
		if c.buf == nil {
			c.buf = msgBufs.Get().(*[128]msg)
		}
		ms, err := e.msgsRange(p, l.from, l.to, c.buf[:0])
		if err != nil {
			return 0, false
		}
		c.l, c.ms, c.next = l, ms, 0
	}
	for n := range c.ms {
		i := (c.next + n) % len(c.ms)
		m := &c.ms[i]
		var match bool
		switch {
		case byID:
			match = m.id == id
		case m.txn != "":
			match = m.txn == it.TransactionID
		default:
			match = idText && m.id == id
		}
		if match {
			c.next = i + 1
			return l.from + uint64(i), true
		}
	}
	return 0, false
}

// settle ends pg's lease when it is released or fully acked, arms a retry
// delay, tells the group what became deliverable and trims the cache.
// Caller holds p's stripe.
func (e *Engine) settle(p *partition, g *group, pg *pgState, now int64, wakes *[]*waiter) {
	a := pg.act
	if a == nil {
		return
	}
	if l := a.lease; l != nil && !l.ended && (l.released || l.nDone == len(l.status)) {
		e.endLease(p, pg, l, wakes)
	}
	if a.blockedUntil != 0 {
		if a.blockedUntil <= now {
			a.blockedUntil = 0
		} else if !a.blockTimer.scheduled() {
			p.st().wheel.schedule(&a.blockTimer, a.blockedUntil, a)
		}
	}
	e.notify(p, g, pg, wakes)
	e.shrinkTail(p, false)
}

// fire ends a retry delay: the partition is served to the group again.
func (a *pgActive) fire(f *wheelFire) {
	if a.blockedUntil == 0 || a.g.deleted.Load() {
		return
	}
	if a.blockedUntil > f.now {
		a.p.st().wheel.schedule(&a.blockTimer, a.blockedUntil, a)
		return
	}
	a.blockedUntil = 0
	e := f.e
	p, g := a.p, a.g
	if g.idx >= len(p.groups) || p.groups[g.idx].act != a {
		return
	}
	var wakes []*waiter
	e.notify(p, g, &p.groups[g.idx], &wakes)
	if len(wakes) > 0 {
		f.after = append(f.after, func() { e.wake(wakes) })
	}
}

// countAcks counts acks of q that took effect.
func (e *Engine) countAcks(q *queue, items []AckItem) {
	var failed uint64
	for i := range items {
		if items[i].Status != Completed {
			failed++
		}
	}
	n := uint64(len(items))
	e.stats.acked.Add(n)
	e.stats.ackFailed.Add(failed)
	q.flow.acked.Add(n)
	q.flow.ackFailed.Add(failed)
}
