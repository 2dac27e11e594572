package engine

import (
	"context"
	"sort"
)

// Deleting one message (Queen's DELETE /messages/:partitionId/:transactionId):
// the message is not rewritten, it gets a tombstone. A tombstoned message
// is never delivered again and no longer found: every group passes it as if
// it were completed (a lease that covers it counts it done), browsing skips
// it, and retention removes it with its record. Tombstones live beside the
// partition (most partitions never have one) and are journaled.

// tombs returns p's tombstoned offsets, sorted. Caller holds p's stripe.
func (q *queue) tombsOf(p *partition) []uint64 {
	if !q.hasTombs.Load() {
		return nil
	}
	q.tombMu.Lock()
	defer q.tombMu.Unlock()
	return q.tombs[p]
}

func (q *queue) tombstoned(p *partition, off uint64) bool {
	if !q.hasTombs.Load() {
		return false
	}
	t := q.tombsOf(p)
	i := sort.Search(len(t), func(i int) bool { return t[i] >= off })
	return i < len(t) && t[i] == off
}

// addTomb records a tombstone. Caller holds p's stripe.
func (q *queue) addTomb(p *partition, off uint64) {
	q.tombMu.Lock()
	defer q.tombMu.Unlock()
	if q.tombs == nil {
		q.tombs = map[*partition][]uint64{}
		q.hasTombs.Store(true)
	}
	t := q.tombs[p]
	i := sort.Search(len(t), func(i int) bool { return t[i] >= off })
	if i < len(t) && t[i] == off {
		return
	}
	t = append(t, 0)
	copy(t[i+1:], t[i:])
	t[i] = off
	q.tombs[p] = t
}

// dropTombsBelow forgets tombstones of messages retention removed. Caller
// holds p's stripe.
func (q *queue) dropTombsBelow(p *partition, low uint64) {
	if !q.hasTombs.Load() {
		return
	}
	q.tombMu.Lock()
	defer q.tombMu.Unlock()
	t := q.tombs[p]
	k := sort.Search(len(t), func(i int) bool { return t[i] >= low })
	if k == len(t) {
		delete(q.tombs, p)
	} else if k > 0 {
		q.tombs[p] = append([]uint64(nil), t[k:]...)
	}
}

// DeleteMessage tombstones the message of a partition named by its
// transactionId (or its id): it is never delivered or listed again. It
// reports whether there was such a message, once the tombstone is durable
// (or ctx ends).
func (e *Engine) DeleteMessage(ctx context.Context, partitionID UUID, txn string) (bool, error) {
	if err := e.check(); err != nil {
		return false, err
	}
	p := e.partitionByID(partitionID)
	if p == nil {
		return false, nil
	}
	st := p.st()
	st.mu.Lock()
	off, ok := e.findTxn(p, txn, 0)
	if !ok {
		if id, err := ParseUUID(txn); err == nil {
			off, ok = e.findByID(p, id)
		}
	}
	if !ok || off < p.low() || off >= p.durable || p.q.tombstoned(p, off) {
		st.mu.Unlock()
		return false, nil
	}
	b := make([]byte, 0, 24)
	b = append(b, recTomb)
	b = appendU64(b, p.q.id)
	b = appendUvarint(b, p.seq)
	b = appendUvarint(b, off)
	ch := make(chan error, 1)
	if _, err := e.append(b, func(err error) { ch <- err }); err != nil {
		st.mu.Unlock()
		return false, err
	}
	p.q.addTomb(p, off)
	st.mu.Unlock()
	if err := waitDurable(ctx, ch); err != nil {
		return false, err
	}
	return true, nil
}
