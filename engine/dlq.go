package engine

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"
)

// The dead-letter queue of a queue: entries are filed by acks (a dlq ack, or
// a failed ack with no retries left) and by pops that meet a message they
// cannot read, in the same journal record as the change that filed them;
// listed a page at a time (DLQ, DLQFilter); redriven or purged.

// DLQEntry is a dead-lettered message as listing returns it.
type DLQEntry struct {
	ID         UUID    // the entry's own id: redrive and purge name it
	Message    Message // Payload included (in clear); LeaseID zero; Group is the group it failed in
	Error      string
	RetryCount int
	FailedAt   int64 // Unix nanoseconds
}

// dlqItem is a dead-letter entry as the engine keeps it: the message as
// stored (its payload still sealed when the queue encrypts), its partition
// and its group.
type dlqItem struct {
	deadEntry
	p     *partition
	group string
}

// Filing.

// deadFor builds the dead-letter entry of p's message at off.
func (e *Engine) deadFor(p *partition, off uint64, retries int, now int64, errText string) deadEntry {
	d := deadEntry{id: e.ids.next(now), off: off, retries: retries, failedAt: now, err: own(errText)}
	if m, err := e.msgAt(p, off); err == nil {
		d.m = m
	} else {
		e.log.Error("dead-letter: message unreadable", "queue", p.q.name, "partition", p.name, "offset", off, "err", err)
	}
	return d
}

// fileDead adds journaled dead-letter entries, filed by a change of this
// run, to the queue's DLQ, and counts them in Stats.DeadLettered.
func (e *Engine) fileDead(p *partition, g *group, dead []deadEntry) {
	e.refileDead(p, g, dead)
	e.stats.deadLettered.Add(uint64(len(dead)))
	p.q.flow.deadLettered.Add(uint64(len(dead)))
}

// refileDead adds dead-letter entries that recovery brought back (from a
// snapshot or the journal) to the queue's DLQ: they were filed before this
// start, so Stats, which counts since start, does not count them again.
func (e *Engine) refileDead(p *partition, g *group, dead []deadEntry) {
	if len(dead) == 0 {
		return
	}
	p.q.dlqMu.Lock()
	for i := range dead {
		p.q.dlq = append(p.q.dlq, dlqItem{deadEntry: dead[i], p: p, group: g.name})
	}
	p.q.dlqMu.Unlock()
}

// Listing.

// DLQFilter selects dead-letter entries. Zero fields match everything;
// Limit 0 means DefaultDLQPage, and above MaxDLQPage it is MaxDLQPage.
type DLQFilter struct {
	Queue     string // "" = every queue
	Group     string
	Partition string
	From, To  time.Time // FailedAt range (inclusive; zero = open)
	Limit     int
	Offset    int
	// MaxBytes bounds a listed page by size: entries are listed while their
	// sizes (DLQEntry.Size) add up to at most MaxBytes, and the first one
	// always; 0 means no bound but Limit. The total still counts every
	// match, so a page cut short says so by its length.
	MaxBytes int
}

// Page sizes of the dead-letter listing.
const (
	DefaultDLQPage = 100
	MaxDLQPage     = 10_000
)

// DLQEntryFixed is the most bytes a dead-letter entry's listed form (over
// any transport) takes beyond its payload and its strings.
const DLQEntryFixed = 256

// Size is what a listing counts for the entry against DLQFilter.MaxBytes:
// its payload, its strings and DLQEntryFixed.
func (d *DLQEntry) Size() int {
	m := &d.Message
	return DLQEntryFixed + len(m.Payload) + len(m.TransactionID) + len(m.TraceID) + len(m.Queue) + len(m.Partition) +
		len(m.Group) + len(m.ProducerSub) + len(d.Error)
}

// DLQ lists dead-letter entries, oldest first, and how many match in all.
func (e *Engine) DLQ(f DLQFilter) ([]DLQEntry, int, error) {
	f.Limit = PageLimit(f.Limit, DefaultDLQPage, MaxDLQPage)
	if f.Offset < 0 {
		return nil, 0, fmt.Errorf("%w: negative offset", ErrInvalid)
	}
	var qs []*queue
	e.mu.RLock()
	if f.Queue != "" {
		if q := e.queues[f.Queue]; q != nil {
			qs = append(qs, q)
		}
	} else {
		for _, q := range e.queues {
			qs = append(qs, q)
		}
	}
	e.mu.RUnlock()
	sort.Slice(qs, func(i, j int) bool { return qs[i].name < qs[j].name })
	var out []DLQEntry
	total, size, full := 0, 0, false
	from, to := int64(0), int64(0)
	if !f.From.IsZero() {
		from = f.From.UnixNano()
	}
	if !f.To.IsZero() {
		to = f.To.UnixNano()
	}
	for _, q := range qs {
		q.dlqMu.Lock()
		for i := range q.dlq {
			d := &q.dlq[i]
			if !f.match(d, from, to) {
				continue
			}
			if total >= f.Offset && len(out) < f.Limit && !full {
				de := e.dlqEntry(d)
				if n := de.Size(); f.MaxBytes <= 0 || len(out) == 0 || size+n <= f.MaxBytes {
					out = append(out, de)
					size += n
				} else {
					full = true // later entries are left out too: a page is a run
				}
			}
			total++
		}
		q.dlqMu.Unlock()
	}
	return out, total, nil
}

func (f *DLQFilter) match(d *dlqItem, from, to int64) bool {
	return (f.Group == "" || d.group == f.Group) &&
		(f.Partition == "" || d.p.name == f.Partition) &&
		(from == 0 || d.failedAt >= from) && (to == 0 || d.failedAt <= to)
}

// dlqEntry is the listed form of a dead-letter entry (payload opened).
func (e *Engine) dlqEntry(d *dlqItem) DLQEntry {
	m, err := e.message(d.p, d.off, &d.m, nil)
	if err != nil {
		// Listed, with the reason in place of a payload nobody can read.
		m = messageMeta(d.p, d.off, &d.m, err)
		e.log.Debug("dead-letter entry: payload unreadable", "queue", d.p.q.name, "entry", d.id, "err", err)
	}
	m.Group, m.RetryCount = d.group, d.retries
	return DLQEntry{ID: d.id, Message: m, Error: d.err, RetryCount: d.retries, FailedAt: d.failedAt}
}

// Dead-letter operations: redrive puts entries back at the end of their
// partitions as new messages (new ids, the same payload, trace id and
// producer), purge drops them. Both are journaled (a dlq-remove record), so
// a restart does not bring removed entries back. A redrive's new messages
// and the removal of their entries are one record: both happen or neither.

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

// Redrive batches: each batch is one journal record (the new messages and
// the removal of their entries), so a batch is redriven whole or not at all,
// and no record grows with the size of the dead-letter queue: a batch holds
// at most Config.MaxRecordBytes of payloads (beyond its first entry) and
// redriveBatchEntries entries.
const redriveBatchEntries = 1000

// RedriveDLQ puts the dead-letter entries matching f (restricted to ids when
// ids is not empty) back at the end of their partitions as new messages and
// removes them from the dead-letter queue. Each batch of entries is put back
// and removed in one durable step; on an error the batches before it are
// done and the rest are still in the dead-letter queue. An entry whose
// payload does not open (no key given opens it) stays in the dead-letter
// queue and the others go on: the call then ends with an ErrEncryption
// error that counts them.
func (e *Engine) RedriveDLQ(ctx context.Context, f DLQFilter, ids []UUID) ([]Redriven, error) {
	if err := e.check(); err != nil {
		return nil, err
	}
	var out []Redriven
	var unread error
	for _, q := range e.dlqQueues(f.Queue) {
		red, err := e.redriveQueue(ctx, q, &f, ids)
		out = append(out, red...)
		if errors.Is(err, errUnreadable) {
			unread = errors.Join(unread, err)
		} else if err != nil {
			return out, err
		}
	}
	return out, unread
}

// errUnreadable marks a redrive's error for the entries it left because
// they do not open.
var errUnreadable = fmt.Errorf("%w: dead letters that no key given opens", ErrEncryption)

func (e *Engine) redriveQueue(ctx context.Context, q *queue, f *DLQFilter, ids []UUID) ([]Redriven, error) {
	q.dlqOp.Lock() // one redrive or purge of this queue at a time
	defer q.dlqOp.Unlock()
	q.dlqMu.Lock()
	sel := q.dlqSelect(f, ids)
	q.dlqMu.Unlock()
	var out []Redriven
	unread, firstUnread := 0, error(nil)
	for len(sel) > 0 {
		// A batch shares one producer subject (a transaction's pushes do).
		k, bytes := 0, 0
		for k < len(sel) && k < redriveBatchEntries && sel[k].m.sub == sel[0].m.sub &&
			(k == 0 || bytes+len(sel[k].m.payload) <= e.cfg.MaxRecordBytes) {
			bytes += len(sel[k].m.payload)
			k++
		}
		batch := sel[:k]
		sel = sel[k:]
		items := make([]PushItem, 0, len(batch))
		gone := make([]UUID, 0, len(batch))
		parts := make([]string, 0, len(batch))
		for i := range batch {
			d := &batch[i]
			pl, err := e.open(&d.m)
			if err != nil {
				if unread++; firstUnread == nil {
					firstUnread = err
				}
				continue // it stays, and the others go on
			}
			items = append(items, PushItem{Queue: q.name, Partition: d.p.name, TraceID: d.m.trace, ProducerSub: d.m.sub, Payload: pl})
			gone = append(gone, d.id)
			parts = append(parts, d.p.name)
		}
		if len(items) == 0 {
			continue
		}
		extra := &txnExtra{rec: encodeDLQDel(q, gone), apply: func() {
			q.dlqMu.Lock()
			q.dropDead(gone)
			q.dlqMu.Unlock()
		}}
		type answer struct {
			r   TxnResult
			err error
		}
		ch := make(chan answer, 1)
		e.transact(nil, items, extra, func(r TxnResult, err error) { ch <- answer{r, err} })
		var a answer
		select {
		case a = <-ch:
		case <-ctx.Done():
			return out, ctx.Err()
		}
		if a.err == nil {
			a.err = a.r.Err
		}
		if a.err != nil {
			return out, fmt.Errorf("engine: redrive of %d dead letters of %q: %w", len(items), q.name, a.err)
		}
		for i, r := range a.r.Pushes {
			out = append(out, Redriven{Entry: gone[i], MessageID: r.MessageID, PartitionID: r.PartitionID, Queue: q.name, Partition: parts[i]})
		}
	}
	if unread > 0 {
		return out, fmt.Errorf("%w: %d of %q stay in its dead-letter queue (the first: %v)", errUnreadable, unread, q.name, firstUnread)
	}
	return out, nil
}

// PurgeDLQ drops the dead-letter entries matching f (restricted to ids when
// ids is not empty) and returns how many went, once that is durable (or ctx
// ends).
func (e *Engine) PurgeDLQ(ctx context.Context, f DLQFilter, ids []UUID) (int, error) {
	if err := e.check(); err != nil {
		return 0, err
	}
	n := 0
	for _, q := range e.dlqQueues(f.Queue) {
		q.dlqOp.Lock()
		q.dlqMu.Lock()
		sel := q.dlqSelect(&f, ids)
		q.dlqMu.Unlock()
		gone := make([]UUID, len(sel))
		for i := range sel {
			gone[i] = sel[i].id
		}
		err := e.removeDead(ctx, q, gone)
		q.dlqOp.Unlock()
		if err != nil {
			return n, err
		}
		n += len(gone)
	}
	return n, nil
}

func encodeDLQDel(q *queue, ids []UUID) []byte {
	b := make([]byte, 0, 16+17*len(ids))
	b = append(b, recDLQDel)
	b = appendU64(b, q.id)
	b = appendUvarint(b, uint64(len(ids)))
	for _, id := range ids {
		b = append(b, id[:]...)
	}
	return b
}

// removeDead journals and applies the removal of entries from q's DLQ.
func (e *Engine) removeDead(ctx context.Context, q *queue, ids []UUID) error {
	if len(ids) == 0 {
		return nil
	}
	ch := make(chan error, 1)
	q.dlqMu.Lock()
	_, err := e.append(encodeDLQDel(q, ids), func(err error) { ch <- err })
	if err == nil {
		q.dropDead(ids)
	}
	q.dlqMu.Unlock()
	if err != nil {
		return err
	}
	return waitDurable(ctx, ch)
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
