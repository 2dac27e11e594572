package engine

import (
	"context"
	"fmt"
	"sort"
)

// TxnResult answers a transaction: one result per ack and per push. Err is
// nil when everything was applied, or wraps ErrTxnAborted (nothing applied)
// with the reason of the first refused operation.
type TxnResult struct {
	Acks   []AckResult
	Pushes []PushResult
	Err    error
}

// TransactionAsync applies acks and pushes all or nothing, as one journal
// record: if any ack would be refused or any push is invalid, nothing
// changes (not even the queues and partitions its pushes would have
// created). A push whose transactionId already exists answers Duplicate and
// does not abort. done runs when the transaction is durable (or refused).
// When the journal refuses the record, done gets that error and nothing
// changed.
func (e *Engine) TransactionAsync(acks []AckItem, pushes []PushItem, done func(TxnResult, error)) {
	e.transact(acks, pushes, nil, done)
}

// Transaction is TransactionAsync for callers that can block.
func (e *Engine) Transaction(ctx context.Context, acks []AckItem, pushes []PushItem) (TxnResult, error) {
	type answer struct {
		r   TxnResult
		err error
	}
	ch := make(chan answer, 1)
	e.TransactionAsync(acks, pushes, func(r TxnResult, err error) { ch <- answer{r, err} })
	select {
	case a := <-ch:
		return a.r, a.err
	case <-ctx.Done():
		return TxnResult{}, ctx.Err()
	}
}

// txnExtra is what a transaction the engine makes itself (a dead-letter
// redrive) adds: a record journaled inside the transaction's, and its effect,
// applied once the journal took the record, with the stripes held.
type txnExtra struct {
	rec   []byte
	apply func()
}

// transact runs a transaction, again when a partition it resolved was
// forgotten or a queue it would create appeared before it could lock them.
func (e *Engine) transact(acks []AckItem, pushes []PushItem, extra *txnExtra, done func(TxnResult, error)) {
	if e.cfg.Route != nil {
		err := e.routeAcks(acks)
		if err == nil {
			err = e.routePushes(pushes)
		}
		if err != nil {
			done(TxnResult{}, err)
			return
		}
	}
	for {
		if err := e.check(); err != nil {
			done(TxnResult{}, err)
			return
		}
		t := &txn{e: e, res: TxnResult{Acks: make([]AckResult, len(acks)), Pushes: make([]PushResult, len(pushes))}}
		if err := t.resolve(acks, pushes); err != nil {
			t.abort()
			t.res.Err = fmt.Errorf("%w: %w", ErrTxnAborted, err)
			done(t.res, nil)
			return
		}
		if t.run(acks, pushes, extra, done) {
			return
		}
	}
}

type txnAck struct {
	p *partition
	g *group
}

type txn struct {
	e       *Engine
	res     TxnResult
	ackT    []txnAck
	pushP   []*partition
	stripes []*stripe
	// fresh are the queues the transaction creates: built here, journaled
	// inside its record, and known to the engine only once it was taken.
	fresh map[string]*queue
	// made are the partitions it created in queues that exist: forgotten
	// again if it keeps nothing in them.
	made []*partition
}

// resolve finds (or prepares) every partition involved and validates pushes.
func (t *txn) resolve(acks []AckItem, pushes []PushItem) error {
	e := t.e
	seen := map[*stripe]bool{}
	add := func(s *stripe) {
		if !seen[s] {
			seen[s] = true
			t.stripes = append(t.stripes, s)
		}
	}
	for i := range acks {
		p, g, err := e.resolveAckTarget(&acks[i])
		if err != nil {
			t.res.Acks[i].Err = err
			return fmt.Errorf("ack %d: %w", i, err)
		}
		t.ackT = append(t.ackT, txnAck{p, g})
		add(p.st())
	}
	for i := range pushes {
		it := &pushes[i]
		fail := func(err error) error {
			t.res.Pushes[i] = PushResult{Status: Failed, Err: err}
			return fmt.Errorf("push %d: %w", i, err)
		}
		if err := e.checkPushItem(it); err != nil {
			return fail(err)
		}
		if it.ProducerSub != pushes[0].ProducerSub {
			return fail(fmt.Errorf("%w: one transaction's pushes must share one producer subject", ErrInvalid))
		}
		q, err := t.queue(it.Queue)
		if err != nil {
			return fail(err)
		}
		if _, _, err := e.sealing(q); err != nil {
			return fail(err)
		}
		name := it.Partition
		if name == "" {
			name = DefaultPartition
		}
		p, created, err := e.partitionOrCreate(q, name)
		if err != nil {
			return fail(err)
		}
		if created && t.fresh[q.name] != q {
			t.made = append(t.made, p)
		}
		t.pushP = append(t.pushP, p)
		add(p.st())
	}
	base := &e.stripes[0]
	sort.Slice(t.stripes, func(i, j int) bool {
		return stripeIndex(base, t.stripes[i]) < stripeIndex(base, t.stripes[j])
	})
	return nil
}

// queue returns the queue a push names: a known one, or one this
// transaction creates.
func (t *txn) queue(name string) (*queue, error) {
	e := t.e
	if q := e.queue(name); q != nil {
		return q, nil
	}
	if q := t.fresh[name]; q != nil {
		return q, nil
	}
	if err := checkName("queue", name, true); err != nil {
		return nil, err
	}
	o := autoQueueOptions(name)
	q := e.newQueue(name, newQueueID(), e.newStamp(), &o)
	if t.fresh == nil {
		t.fresh = map[string]*queue{}
	}
	t.fresh[q.name] = q
	return q, nil
}

// abort forgets what resolve created, once nothing of the transaction was
// kept: the partitions it made in existing queues (its fresh queues were
// never known to anyone).
func (t *txn) abort() {
	for _, p := range t.made {
		t.e.dropUnused(p)
	}
}

// run applies the transaction. It reports false, having changed nothing,
// when it must be resolved again (a partition it resolved was forgotten, or
// a queue it would create was created by someone else meanwhile).
func (t *txn) run(acks []AckItem, pushes []PushItem, extra *txnExtra, done func(TxnResult, error)) bool {
	e := t.e
	if len(t.fresh) > 0 {
		// Queues are created under the engine lock (outermost of the
		// locks taken here): nobody may create the same name meanwhile.
		e.mu.Lock()
		for name, q := range t.fresh {
			if e.queues[name] != nil || e.queuesID[q.id] != nil {
				e.mu.Unlock()
				t.abort()
				return false
			}
		}
	}
	for _, s := range t.stripes {
		s.mu.Lock()
	}
	unlock := func() {
		for i := len(t.stripes) - 1; i >= 0; i-- {
			t.stripes[i].mu.Unlock()
		}
		if len(t.fresh) > 0 {
			e.mu.Unlock()
		}
	}
	for _, p := range t.pushP {
		if p.gone {
			unlock()
			t.abort()
			return false
		}
	}
	now := e.clock.Now()
	// Acks first, with the means to undo them.
	type pair struct {
		p *partition
		g *group
	}
	var order []pair
	saves := map[pair]*saved{}
	dead := map[pair][]deadEntry{}
	var cache leaseMsgs
	defer cache.release()
	var secs []*txnSection
	undo := func() {
		for _, s := range saves {
			s.restore()
		}
		for _, x := range secs { // give back the maxSize room taken
			if x.p.q.options().MaxSize > 0 {
				x.p.q.depth.Add(-int64(len(x.msgs)))
			}
		}
		unlock()
		t.abort()
	}
	for i := range acks {
		pr := pair{t.ackT[i].p, t.ackT[i].g}
		pg := e.pgFor(pr.p, pr.g)
		if saves[pr] == nil {
			saves[pr] = save(pg)
			order = append(order, pr)
		}
		r := &t.res.Acks[i]
		*r = AckResult{Queue: pr.p.q.name, Partition: pr.p.name}
		var d []deadEntry
		_, err := e.ackOne(pr.p, pr.g, pg, &acks[i], now, r, &d, &cache)
		dead[pr] = append(dead[pr], d...)
		if err != nil {
			r.Err = err
			undo()
			t.res.Err = fmt.Errorf("%w: ack %d: %w", ErrTxnAborted, i, err)
			done(t.res, nil)
			return true
		}
	}
	// Then pushes: one push record per partition, inside one txn record.
	byP := map[*partition]*txnSection{}
	for i := range pushes {
		it := &pushes[i]
		p := t.pushP[i]
		s := byP[p]
		if s == nil {
			s = &txnSection{p: p, ts: e.pushStamp(p), sub: it.ProducerSub}
			s.flags, s.key, _ = e.sealing(p.q) // resolve refused a queue it cannot seal for
			s.d = e.newPushDecision(p, now)
			s.first = s.d.first
			byP[p] = s
			secs = append(secs, s)
		}
		r := &t.res.Pushes[i]
		if !e.decidePush(&s.d, it, r, s.earlier) {
			if r.Status == Duplicate {
				continue
			}
			undo()
			t.res.Err = fmt.Errorf("%w: push %d: %w", ErrTxnAborted, i, r.Err)
			done(t.res, nil)
			return true
		}
		id := r.MessageID
		pl := it.Payload
		if s.flags&flagEncrypted != 0 {
			pl = e.appendSealed(nil, pl)
		}
		s.msgs = append(s.msgs, msg{id: id, ts: s.ts, txn: it.TransactionID, trace: it.TraceID, payload: pl, key: s.key})
		s.items = append(s.items, it)
	}
	// Encode: new queues, effects, push sections, then the extra record.
	var subs [][]byte
	names := make([]string, 0, len(t.fresh))
	for name := range t.fresh {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		q := t.fresh[name]
		subs = append(subs, encodeQueue(q, q.options()))
	}
	for _, pr := range order {
		subs = append(subs, e.effectRecord(pr.p, pr.g, &pr.p.groups[pr.g.idx], dead[pr]))
	}
	for _, s := range secs {
		if len(s.msgs) == 0 {
			continue
		}
		subs = append(subs, encodePush(recPush, s.p, s.first, s.ts, s.flags, s.sub, s.msgs))
	}
	if extra != nil {
		subs = append(subs, extra.rec)
	}
	rec := encodeTxn(subs)
	var touched []pushTouch
	pend := newPending(func(err error) {
		if err == nil {
			e.publish(touched)
		}
		done(t.res, err)
	})
	pos, err := e.appendHeld(rec, pend)
	if err != nil {
		undo()
		done(TxnResult{}, err)
		return true
	}
	for _, name := range names {
		q := t.fresh[name]
		e.queues[q.name] = q
		e.queuesID[q.id] = q
		e.queueBorn(q.name)
	}
	// Apply in memory: cached messages alias the txn record's push sections.
	r := reader{b: rec[1:]}
	n := r.count(1)
	for i := 0; i < n; i++ {
		subrec := r.bytesRef()
		sub := reader{b: subrec}
		if sub.u8() != recPush {
			continue
		}
		prec := readPush(&sub, subrec)
		s := secs[0]
		for _, x := range secs {
			if x.p.seq == prec.seq && x.p.q.id == prec.queueID {
				s = x
			}
		}
		e.applyPushMem(s.p, pos, prec.first, prec.ts, prec.buf, prec.refs, prec.flags, prec.sub, prec.key, false)
		if s.p.q.options().MaxSize <= 0 {
			s.p.q.depth.Add(int64(len(prec.refs)))
		}
		floor := e.dedupFloor(s.p)
		for k := range s.msgs {
			if s.msgs[k].txn != "" {
				e.rememberTxn(s.p, s.msgs[k].txn, s.first+uint64(k), floor)
			}
		}
		touched = append(touched, pushTouch{p: s.p, end: s.p.next})
		e.stats.pushed.Add(uint64(len(prec.refs)))
		s.p.q.flow.pushed.Add(uint64(len(prec.refs)))
	}
	if extra != nil {
		extra.apply()
	}
	var wakes []*waiter
	for _, pr := range order {
		e.fileDead(pr.p, pr.g, dead[pr])
		e.settle(pr.p, pr.g, &pr.p.groups[pr.g.idx], now, &wakes)
	}
	for i := 0; i < len(acks); {
		j := i + 1
		for j < len(acks) && t.ackT[j].p.q == t.ackT[i].p.q {
			j++
		}
		e.countAcks(t.ackT[i].p.q, acks[i:j])
		i = j
	}
	unlock()
	for _, p := range t.made {
		e.dropUnused(p) // if it kept nothing in p (duplicates only)
	}
	e.wake(wakes)
	pend.finish()
	return true
}

// encodeTxn wraps records as one transaction record: recovery applies them
// in order, all or none.
func encodeTxn(subs [][]byte) []byte {
	size := 1 + 10
	for _, s := range subs {
		size += 10 + len(s)
	}
	rec := make([]byte, 0, size)
	rec = append(rec, recTxn)
	rec = appendUvarint(rec, uint64(len(subs)))
	for _, s := range subs {
		rec = appendBytes(rec, s)
	}
	return rec
}

func stripeIndex(base, s *stripe) uintptr {
	return (uintptrOf(s) - uintptrOf(base)) / stripeSize
}

// txnSection is a transaction's pushes to one partition.
type txnSection struct {
	p     *partition
	first uint64
	msgs  []msg
	items []*PushItem
	ts    int64
	flags uint8
	key   uint64 // the key that seals its payloads (with flagEncrypted)
	sub   string
	d     pushDecision
}

// earlier finds an earlier message of the section with txn (for
// decidePush).
func (s *txnSection) earlier(txn string) (uint64, UUID, bool) {
	for k := range s.msgs {
		if s.msgs[k].txn == txn {
			return s.first + uint64(k), s.msgs[k].id, true
		}
	}
	return 0, UUID{}, false
}
