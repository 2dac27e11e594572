package engine

import (
	"context"
	"fmt"
	"sort"
)

// Dead-letter operations: redrive puts entries back at the end of their
// partitions as new messages (new ids, the same payload, trace id and
// producer), purge drops them. Both are journaled (a dlq-remove record), so
// a restart does not bring removed entries back. A redrive pushes first and
// removes after: a crash in between leaves the entry in the DLQ and its new
// message queued (at least once, never lost).

// Redriven is one entry put back.
type Redriven struct {
	Entry       UUID // the dead-letter entry's id
	MessageID   UUID // the new message
	PartitionID UUID
	Queue       string
	Partition   string
}

// dlqSelect returns the entries of q matching f (or, when ids is not empty,
// those ids among the entries matching f). q.dlqMu is held.
func (q *queue) dlqSelect(f *DLQFilter, ids []UUID) []dlqItem {
	var from, to int64
	if !f.From.IsZero() {
		from = f.From.UnixNano()
	}
	if !f.To.IsZero() {
		to = f.To.UnixNano()
	}
	var want map[UUID]bool
	if len(ids) > 0 {
		want = make(map[UUID]bool, len(ids))
		for _, id := range ids {
			want[id] = true
		}
	}
	var out []dlqItem
	for i := range q.dlq {
		d := &q.dlq[i]
		if f.match(d, from, to) && (want == nil || want[d.id]) {
			out = append(out, *d)
		}
	}
	return out
}

func (e *Engine) dlqQueues(name string) []*queue {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if name != "" {
		if q := e.queues[name]; q != nil {
			return []*queue{q}
		}
		return nil
	}
	qs := make([]*queue, 0, len(e.queues))
	for _, q := range e.queues {
		qs = append(qs, q)
	}
	sort.Slice(qs, func(i, j int) bool { return qs[i].name < qs[j].name })
	return qs
}

// RedriveDLQ puts the dead-letter entries matching f (restricted to ids when
// ids is not empty) back at the end of their partitions as new messages and
// removes them from the dead-letter queue.
func (e *Engine) RedriveDLQ(ctx context.Context, f DLQFilter, ids []UUID) ([]Redriven, error) {
	if err := e.check(); err != nil {
		return nil, err
	}
	var out []Redriven
	for _, q := range e.dlqQueues(f.Queue) {
		q.dlqMu.Lock()
		sel := q.dlqSelect(&f, ids)
		q.dlqMu.Unlock()
		if len(sel) == 0 {
			continue
		}
		items := make([]PushItem, 0, len(sel))
		var keep []dlqItem
		for i := range sel {
			d := &sel[i]
			pl, err := e.open(&d.m)
			if err != nil {
				return out, err
			}
			items = append(items, PushItem{Queue: q.name, Partition: d.p.name, TraceID: d.m.trace, ProducerSub: d.m.sub, Payload: pl})
			keep = append(keep, *d)
		}
		res, err := e.Push(ctx, items)
		if err != nil {
			return out, err
		}
		var done []UUID
		for i, r := range res {
			if r.Status != Queued {
				return out, fmt.Errorf("engine: redrive of %s: %w", keep[i].id, r.Err)
			}
			done = append(done, keep[i].id)
			out = append(out, Redriven{Entry: keep[i].id, MessageID: r.MessageID, PartitionID: r.PartitionID, Queue: q.name, Partition: keep[i].p.name})
		}
		if err := e.removeDead(q, done); err != nil {
			return out, err
		}
	}
	return out, nil
}

// PurgeDLQ drops the dead-letter entries matching f (restricted to ids when
// ids is not empty) and returns how many went.
func (e *Engine) PurgeDLQ(f DLQFilter, ids []UUID) (int, error) {
	if err := e.check(); err != nil {
		return 0, err
	}
	n := 0
	for _, q := range e.dlqQueues(f.Queue) {
		q.dlqMu.Lock()
		sel := q.dlqSelect(&f, ids)
		q.dlqMu.Unlock()
		if len(sel) == 0 {
			continue
		}
		gone := make([]UUID, len(sel))
		for i := range sel {
			gone[i] = sel[i].id
		}
		if err := e.removeDead(q, gone); err != nil {
			return n, err
		}
		n += len(gone)
	}
	return n, nil
}

// removeDead journals and applies the removal of entries from q's DLQ.
func (e *Engine) removeDead(q *queue, ids []UUID) error {
	if len(ids) == 0 {
		return nil
	}
	b := make([]byte, 0, 16+17*len(ids))
	b = append(b, recDLQDel)
	b = appendU64(b, q.id)
	b = appendUvarint(b, uint64(len(ids)))
	for _, id := range ids {
		b = append(b, id[:]...)
	}
	ch := make(chan error, 1)
	q.dlqMu.Lock()
	_, err := e.append(b, func(err error) { ch <- err })
	if err == nil {
		q.dropDead(ids)
	}
	q.dlqMu.Unlock()
	if err != nil {
		return err
	}
	return <-ch
}

// dropDead removes entries by id. q.dlqMu is held.
func (q *queue) dropDead(ids []UUID) {
	gone := make(map[UUID]bool, len(ids))
	for _, id := range ids {
		gone[id] = true
	}
	k := 0
	for i := range q.dlq {
		if !gone[q.dlq[i].id] {
			q.dlq[k] = q.dlq[i]
			k++
		}
	}
	clear(q.dlq[k:])
	q.dlq = q.dlq[:k]
}
