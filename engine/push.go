package engine

import (
	"context"
	"fmt"
)

// PushAsync stores items and fills res (len(res) must be len(items)) with one
// result per item, in order. done runs once every queued item is durable
// (from the journal's committer goroutine, or at once from this one when
// nothing needed journaling). err is set only when the whole call failed and
// left no trace (closed engine, failed journal, or a journal that refused
// every record of the call: ErrOverloaded, ErrJournal); res is then not
// meaningful. When the journal refuses some of a call's records and takes
// others, the items of the refused ones are answered Failed with the reason
// and nothing of them is kept. The engine copies what it keeps: items may be
// reused once PushAsync returns.
func (e *Engine) PushAsync(items []PushItem, res []PushResult, done func(error)) {
	if err := e.check(); err != nil {
		done(err)
		return
	}
	if len(res) < len(items) {
		done(fmt.Errorf("%w: result slice shorter than items", ErrInvalid))
		return
	}
	if e.cfg.Route != nil {
		if err := e.routePushes(items); err != nil {
			done(err)
			return
		}
	}
	var touched []pushTouch
	pend := newPending(func(err error) {
		if err == nil {
			e.publish(touched)
		}
		done(err)
	})
	var refused error
	for i := 0; i < len(items); {
		j := i + 1
		for j < len(items) && items[j].Queue == items[i].Queue && items[j].Partition == items[i].Partition && items[j].ProducerSub == items[i].ProducerSub {
			j++
		}
		t, jerr := e.pushRun(items[i:j], res[i:j], pend)
		if t.p != nil {
			touched = append(touched, t)
		} else if jerr != nil && refused == nil {
			refused = jerr
		}
		i = j
	}
	if refused != nil && len(touched) == 0 {
		done(refused) // nothing of the call was kept
		return
	}
	pend.finish()
}

// Push is PushAsync for callers that can block. ctx bounds the wait for
// durability; an item answered Queued is durable when Push returns nil.
func (e *Engine) Push(ctx context.Context, items []PushItem) ([]PushResult, error) {
	res := make([]PushResult, len(items))
	ch := make(chan error, 1)
	e.PushAsync(items, res, func(err error) { ch <- err })
	select {
	case err := <-ch:
		return res, err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// pushTouch is a partition a push appended to and the end of what it added.
type pushTouch struct {
	p   *partition
	end uint64
}

// failRun answers every item of a run Failed with err (each result keeps
// the item's transactionId, as pushed).
func (e *Engine) failRun(items []PushItem, res []PushResult, err error) {
	for i := range res {
		res[i] = PushResult{Status: Failed, TransactionID: items[i].TransactionID, Err: err}
	}
}

// pushRun stores items that share a queue, a partition and a producer as
// one journal record, appended under the partition's stripe lock so that
// journal order is offset order. It returns what it appended to (t.p nil
// when nothing), and the journal's refusal when the journal refused the
// record (the items are then answered Failed and nothing is kept: not
// their messages, not the maxSize room they reserved, not a partition they
// created).
func (e *Engine) pushRun(items []PushItem, res []PushResult, pend *pending) (pushTouch, error) {
	q, err := e.queueOrCreate(items[0].Queue)
	if err != nil {
		e.failRun(items, res, err)
		if isRefusal(err) {
			return pushTouch{}, err
		}
		return pushTouch{}, nil
	}
	pname := items[0].Partition
	if pname == "" {
		pname = DefaultPartition
	}
	for {
		p, created, err := e.partitionOrCreate(q, pname)
		if err != nil {
			e.failRun(items, res, err)
			return pushTouch{}, nil
		}
		t, jerr, again := e.pushTo(q, p, items, res, pend)
		if again {
			continue // p was forgotten meanwhile: look it up again
		}
		if created && t.p == nil {
			e.dropUnused(p) // nothing was kept in it: it goes again
		}
		return t, jerr
	}
}

// pushTo is pushRun's work on partition p of q; again reports that p was
// forgotten before its stripe could be taken.
func (e *Engine) pushTo(q *queue, p *partition, items []PushItem, res []PushResult, pend *pending) (_ pushTouch, _ error, again bool) {
	flags, key, err := e.sealing(q)
	if err != nil {
		e.failRun(items, res, err)
		return pushTouch{}, nil, false
	}
	sub := items[0].ProducerSub
	if len(sub) > MaxNameBytes {
		e.failRun(items, res, fmt.Errorf("%w: producer subject longer than %d bytes", ErrInvalid, MaxNameBytes))
		return pushTouch{}, nil, false
	}
	st := p.st()
	st.mu.Lock()
	defer st.mu.Unlock()
	if p.gone {
		return pushTouch{}, nil, true
	}
	if q.deleted.Load() {
		e.failRun(items, res, fmt.Errorf("%w: %q was deleted", ErrQueueNotFound, q.name))
		return pushTouch{}, nil, false
	}
	ts := e.pushStamp(p)
	d := e.newPushDecision(p, e.clock.Now())
	// Pass 1: decide each item and size the record.
	size := 1 + 8 + 10 + 10 + len(p.name) + 10 + 10 + 1 + 10 + len(sub) + 8 + 10
	var seen runTxns
	for i := range items {
		it := &items[i]
		earlier := func(txn string) (uint64, UUID, bool) {
			if k := seen.find(items[:i], res[:i], txn); k >= 0 {
				return res[k].Offset, res[k].MessageID, true
			}
			return 0, UUID{}, false
		}
		if !e.decidePush(&d, it, &res[i], earlier) {
			continue
		}
		if it.TransactionID != "" {
			seen.add(it.TransactionID, i, len(items))
		}
		size += 16 + 3 + 10 + len(it.TransactionID) + len(it.TraceID) + len(it.Payload) + sealOverhead
	}
	n := d.n
	if n == 0 {
		return pushTouch{}, nil, false
	}
	// Pass 2: encode the record; the cache keeps it and points into it.
	b := make([]byte, 0, size)
	b = appendPushHeaderKey(b, recPush, p, d.first, ts, flags, sub, key, n)
	refs := make([]msgRef, n)
	k := 0
	for i := range items {
		if res[i].Status != Queued {
			continue
		}
		it := &items[i]
		m := &refs[k]
		m.id = res[i].MessageID
		k++
		b = append(b, m.id[:]...)
		b = appendStr(b, it.TransactionID)
		m.txn, m.txnLen = uint32(len(b)-len(it.TransactionID)), uint8(len(it.TransactionID))
		b = appendStr(b, it.TraceID)
		m.trace, m.traceLen = uint32(len(b)-len(it.TraceID)), uint8(len(it.TraceID))
		if flags&flagEncrypted != 0 {
			b = appendUvarint(b, uint64(len(it.Payload)+sealOverhead))
			at := len(b)
			b = e.appendSealed(b, it.Payload)
			m.pay, m.payLen = uint32(at), uint32(len(b)-at)
		} else {
			b = appendBytes(b, it.Payload)
			m.pay, m.payLen = uint32(len(b)-len(it.Payload)), uint32(len(it.Payload))
		}
	}
	pos, err := e.appendHeld(b, pend)
	if err != nil {
		for i := range res {
			if res[i].Status == Queued {
				res[i] = PushResult{Status: Failed, TransactionID: res[i].TransactionID, Err: err}
			}
		}
		if d.maxSize > 0 {
			q.depth.Add(-int64(n)) // give back what reserve counted
		}
		return pushTouch{}, err, false
	}
	e.applyPushMem(p, pos, d.first, ts, b, refs, flags, own(sub), key, false)
	for i := range items {
		if res[i].Status == Queued && items[i].TransactionID != "" {
			e.rememberTxn(p, items[i].TransactionID, res[i].Offset, d.floor)
		}
	}
	if d.maxSize <= 0 {
		q.depth.Add(int64(n)) // with a maxSize, reserve counted them
	}
	e.stats.pushed.Add(uint64(n))
	q.flow.pushed.Add(uint64(n))
	return pushTouch{p: p, end: p.next}, nil, false
}

// The push decision, written once for pushRun and transactions: an item's
// sizes, its transactionId against the record's earlier items and then the
// partition's dedup window, the queue's maxSize room, its id; and, for the
// record, its timestamp and whether its payloads are sealed.

// checkPushItem checks what a push item must be on its own: its payload
// within Config.MaxPayloadBytes, its transactionId and traceId within
// MaxNameBytes.
func (e *Engine) checkPushItem(it *PushItem) error {
	if len(it.Payload) > e.cfg.MaxPayloadBytes {
		return fmt.Errorf("%w: payload of %d bytes is above the limit of %d", ErrTooLarge, len(it.Payload), e.cfg.MaxPayloadBytes)
	}
	if len(it.TransactionID) > MaxNameBytes || len(it.TraceID) > MaxNameBytes {
		return fmt.Errorf("%w: transactionId and traceId are limited to %d bytes", ErrInvalid, MaxNameBytes)
	}
	return nil
}

// sealing is how q's new messages are stored: sealed (flagEncrypted) under
// the key in use when q asks for encryption, with an error when it does and
// no encryption key is configured.
func (e *Engine) sealing(q *queue) (flags uint8, key uint64, err error) {
	if !q.options().EncryptionEnabled {
		return 0, 0, nil
	}
	if e.aead == nil {
		err = fmt.Errorf("%w: queue %q asks for encryption and no encryption key is configured", ErrEncryption, q.name)
	}
	return flagEncrypted, e.keyID, err
}

// pushStamp is the timestamp of a new push record into p: the engine's next
// stamp, and later than p's last. Caller holds p's stripe.
func (e *Engine) pushStamp(p *partition) int64 {
	ts := e.newStamp()
	if ts <= p.lastTS {
		ts = p.lastTS + 1
		e.observeStamp(ts)
	}
	return ts
}

// pushDecision is one push record into p being decided: the offset it
// starts at and the messages it stores so far.
type pushDecision struct {
	p       *partition
	pid     UUID
	first   uint64 // the record's first offset
	n       int    // messages stored so far
	now     int64
	floor   uint64 // the dedup window's first offset
	maxSize int64
}

// newPushDecision starts deciding a push record into p (new ids are stamped
// now). Caller holds p's stripe until the record is appended.
func (e *Engine) newPushDecision(p *partition, now int64) pushDecision {
	d := pushDecision{p: p, pid: p.id(), first: p.next, now: now, maxSize: p.q.options().MaxSize}
	if p.dedup != nil {
		d.floor = e.dedupFloor(p)
	}
	return d
}

// decidePush decides one item and answers it in r: Failed (its sizes, or
// the queue at its maxSize), Duplicate (its transactionId is one that
// earlier finds among the record's earlier items, or is in the dedup
// window), or Queued at the record's next offset with a new id, its room
// under maxSize reserved (the caller gives it back if the record is not
// kept). It reports whether the item is stored.
func (e *Engine) decidePush(d *pushDecision, it *PushItem, r *PushResult, earlier func(txn string) (off uint64, id UUID, ok bool)) bool {
	*r = PushResult{PartitionID: d.pid, TransactionID: it.TransactionID}
	if err := e.checkPushItem(it); err != nil {
		r.Status, r.Err = Failed, err
		return false
	}
	if it.TransactionID != "" {
		if off, id, ok := earlier(it.TransactionID); ok {
			r.Status, r.Offset, r.MessageID = Duplicate, off, id
			return false
		}
		if off, ok := e.findTxn(d.p, it.TransactionID, d.floor); ok {
			r.Status, r.Offset = Duplicate, off
			if m, err := e.msgAt(d.p, off); err == nil {
				r.MessageID = m.id
			}
			return false
		}
	}
	if d.maxSize > 0 && !d.p.q.reserve(d.maxSize) {
		r.Status, r.Err = Failed, fmt.Errorf("%w: queue %q holds its maxSize of %d messages", ErrQueueFull, d.p.q.name, d.maxSize)
		return false
	}
	r.Status, r.MessageID, r.Offset = Queued, e.ids.next(d.now), d.first+uint64(d.n)
	d.n++
	return true
}

// runTxns finds transactionIds repeated inside one push run: by scanning
// short runs, through a map for long ones.
type runTxns struct{ m map[string]int }

func (s *runTxns) add(txn string, i, runLen int) {
	if runLen > 16 {
		if s.m == nil {
			s.m = make(map[string]int)
		}
		s.m[txn] = i
	}
}

// find returns the index of an earlier queued item with txn, or -1.
func (s *runTxns) find(items []PushItem, res []PushResult, txn string) int {
	if s.m != nil || len(items) > 16 {
		if k, ok := s.m[txn]; ok {
			return k
		}
		return -1
	}
	for k := range items {
		if res[k].Status == Queued && items[k].TransactionID == txn {
			return k
		}
	}
	return -1
}

// applyPushMem adds messages [first, first+len(refs)) to p: a chunk in the
// index, held in memory, its key in p's key runs, and (on replay) the dedup
// index. Caller holds p's stripe.
func (e *Engine) applyPushMem(p *partition, pos, first uint64, ts int64, buf []byte, refs []msgRef, flags uint8, sub string, key uint64, replay bool) {
	if len(refs) == 0 {
		return
	}
	p.noteKey(first, runKey(flags, key))
	mem := &cached{buf: buf, refs: refs, cost: int64(cap(buf) + 48*len(refs) + 64), flags: flags &^ recordFlags, sub: sub, key: key}
	if replay {
		for i := range refs {
			if r := &refs[i]; r.txnLen > 0 {
				e.rememberTxn(p, unsafeString(buf[r.txn:r.txn+uint32(r.txnLen)]), first+uint64(i), 0)
			}
		}
	}
	p.chunks = append(p.chunks, chunk{first: first, pos: pos, ts: ts, mem: mem})
	p.next = first + uint64(len(refs))
	p.lastTS = ts
	if replay {
		p.durable = p.next
	}
	if e.cacheBytes.Add(mem.cost) > e.cfg.CacheBytes {
		e.shrinkTail(p, true)
	}
}

// publish makes committed messages visible and tells the groups.
func (e *Engine) publish(touched []pushTouch) {
	var wakes []*waiter
	for _, t := range touched {
		p := t.p
		p.st().mu.Lock()
		if t.end > p.durable {
			p.durable = t.end
			for _, g := range p.q.groupList() {
				if g != nil {
					pg := e.pgFor(p, g)
					e.notify(p, g, pg, &wakes)
				}
			}
		}
		p.st().mu.Unlock()
	}
	e.wake(wakes)
}
