package engine

import (
	"fmt"
	"sort"
	"time"
)

// Retention removes a partition's oldest messages, whole push records at a
// time, once the queue's options say they may go:
//
//   - retentionEnabled with retentionSeconds: messages older than that;
//   - retentionEnabled with completedRetentionSeconds: messages every group
//     has passed, once that old;
//   - maxWaitTimeSeconds: messages nobody consumed in that time are evicted
//     (the groups that had not reached them move past them; each is counted
//     as evicted).
//
// Messages under a live lease are never removed. A removal is journaled
// (a retain record: the partition's new low offset), applied to the
// cursors, the caches and the depth, and the journal segments it frees are
// dropped at the next snapshot.

// retainCut is the offset below which p's messages may go now (p.low() when
// none may). Caller holds p's stripe.
func (e *Engine) retainCut(p *partition, now int64) uint64 {
	o := p.q.options()
	low := p.low()
	cut := low
	byAge := func(secs int64) uint64 {
		t := now - secs*int64(time.Second)
		i := sort.Search(len(p.chunks), func(i int) bool { return p.chunks[i].ts >= t })
		if i == len(p.chunks) {
			return p.durable
		}
		return min(p.chunks[i].first, p.durable)
	}
	if o.RetentionEnabled && o.RetentionSeconds > 0 {
		cut = max(cut, byAge(o.RetentionSeconds))
	}
	if o.RetentionEnabled && o.CompletedRetentionSeconds > 0 {
		if done, any := p.minCursor(); any {
			c := min(byAge(o.CompletedRetentionSeconds), done)
			// whole records only: the last record that ends at or before c
			i := sort.Search(len(p.chunks), func(i int) bool { return p.chunkEnd(i) > c })
			if i < len(p.chunks) {
				c = p.chunks[i].first
			} else {
				c = p.next
			}
			cut = max(cut, c)
		}
	}
	if o.MaxWaitTimeSeconds > 0 {
		cut = max(cut, byAge(o.MaxWaitTimeSeconds))
	}
	// Never under a live lease: cut at the record holding its first message.
	for i := range p.groups {
		if a := p.groups[i].act; a != nil && a.lease != nil && a.lease.from < cut {
			if ci := p.chunkFor(a.lease.from); ci >= 0 {
				cut = p.chunks[ci].first
			} else {
				cut = low
			}
		}
	}
	return max(cut, low)
}

// applyLow removes p's messages below newLow (a record boundary) and moves
// the cursors that had not reached it. It returns how many messages the
// groups lost unconsumed. Caller holds p's stripe.
func (e *Engine) applyLow(p *partition, newLow uint64) (evicted uint64) {
	k := 0
	for k < len(p.chunks) && p.chunkEnd(k) <= newLow {
		e.dropChunk(&p.chunks[k])
		if p.chunks[k].pos == lostPos {
			p.lost--
		}
		k++
	}
	if k > 0 {
		p.chunks = append([]chunk(nil), p.chunks[k:]...) // let the old array go
		if p.memLo -= int32(k); p.memLo < 0 {
			p.memLo = 0
		}
	}
	for i := range p.groups {
		pg := &p.groups[i]
		if !pg.init() || pg.cursor >= newLow {
			continue
		}
		evicted += newLow - pg.cursor
		pg.cursor = newLow
		if a := pg.act; a != nil {
			a.dropRetriesBelow(newLow)
			relax(pg)
		}
	}
	p.q.dropTombsBelow(p, newLow)
	e.refreshDepth(p)
	return evicted
}

func encodeRetain(p *partition, low uint64) []byte {
	b := make([]byte, 0, 24)
	b = append(b, recRetain)
	b = appendU64(b, p.q.id)
	b = appendUvarint(b, p.seq)
	return appendUvarint(b, low)
}

// RetentionSweep applies every queue's retention options now, and returns
// how many messages it removed. The engine's ticker runs it every second;
// tests call it after moving a FakeClock.
func (e *Engine) RetentionSweep() (removed uint64, err error) {
	if err := e.check(); err != nil {
		return 0, err
	}
	e.mu.RLock()
	var qs []*queue
	for _, q := range e.queues {
		if o := q.options(); o.MaxWaitTimeSeconds > 0 || (o.RetentionEnabled && (o.RetentionSeconds > 0 || o.CompletedRetentionSeconds > 0)) {
			qs = append(qs, q)
		}
	}
	e.mu.RUnlock()
	now := e.clock.Now()
	for _, q := range qs {
		q.mu.RLock()
		parts := append([]*partition(nil), q.parts...)
		q.mu.RUnlock()
		for _, p := range parts {
			if p == nil {
				continue
			}
			st := p.st()
			st.mu.Lock()
			if e.forgettable(p, now) {
				if _, err = e.append(encodeForget(p), nil); err != nil {
					st.mu.Unlock()
					return removed, fmt.Errorf("engine: retention: %w", err)
				}
				st.mu.Unlock()
				e.forget(p)
				continue
			}
			low := p.low()
			cut := e.retainCut(p, now)
			if cut > low {
				if _, err = e.append(encodeRetain(p, cut), nil); err != nil {
					st.mu.Unlock()
					return removed, fmt.Errorf("engine: retention: %w", err)
				}
				ev := e.applyLow(p, cut)
				e.stats.evicted.Add(ev)
				e.stats.retentionCuts.Add(1)
				q.flow.evicted.Add(ev)
				q.flow.retained.Add(cut - low)
				q.flow.retentionCuts.Add(1)
				removed += cut - low
			}
			st.mu.Unlock()
		}
	}
	e.stats.retained.Add(removed)
	return removed, nil
}

// ForgetIdleAfter is how long an empty partition of a queue with retention
// stays known after its last message: then it is forgotten (its name is
// free again, and a new push to it creates a new partition).
const ForgetIdleAfter = time.Hour

// forgettable reports whether p is empty, idle and holds no state worth
// keeping (no lease, no retry count, no delay). Caller holds p's stripe.
func (e *Engine) forgettable(p *partition, now int64) bool {
	if len(p.chunks) > 0 || p.durable != p.next || p.lastTS > now-int64(ForgetIdleAfter) {
		return false
	}
	o := p.q.options()
	if secs := max(o.RetentionSeconds, o.CompletedRetentionSeconds, o.MaxWaitTimeSeconds); p.lastTS > now-secs*int64(time.Second) {
		return false
	}
	for i := range p.groups {
		if p.groups[i].act != nil {
			return false
		}
	}
	return true
}

func encodeForget(p *partition) []byte {
	b := make([]byte, 0, 16)
	b = append(b, recForget)
	b = appendU64(b, p.q.id)
	return appendUvarint(b, p.seq)
}

// forget removes p from its queue (its stripe not held).
func (e *Engine) forget(p *partition) {
	q := p.q
	q.mu.Lock()
	st := p.st()
	st.mu.Lock()
	e.forgetLocked(p)
	st.mu.Unlock()
	q.mu.Unlock()
}

// forgetLocked removes p from its queue; q.mu and p's stripe are held.
func (e *Engine) forgetLocked(p *partition) {
	q := p.q
	p.gone = true
	if q.dropPartition(p) {
		q.byName.del(p.name)
	}
	if p.tm != nil {
		p.st().wheel.cancel(&p.tm.t)
	}
}

// dropUnused forgets p, which a request created and then kept nothing in
// (its pushes were refused), unless something was journaled in it since.
// Nothing names it in the journal, so it must not outlive the request.
func (e *Engine) dropUnused(p *partition) {
	q := p.q
	q.mu.Lock()
	st := p.st()
	st.mu.Lock()
	if !p.gone && p.next == 0 && p.lastTS == 0 {
		e.forgetLocked(p)
		// Nothing ever named it: when it is the newest, its number is
		// free again, and the table is as it was before it.
		if n := len(q.parts); n > 0 && q.parts[n-1] == nil && q.seqs[n-1] == p.seq && q.next == p.seq+1 {
			q.parts, q.seqs = q.parts[:n-1], q.seqs[:n-1]
			q.holes--
			q.next--
		}
	}
	st.mu.Unlock()
	q.mu.Unlock()
}
