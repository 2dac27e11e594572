package engine

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Paged and streamed views: what the transports list is read a page at a
// time, and what they sum is read one partition at a time, so that a
// request costs memory for its page, not for its queue. A queue of 200,000
// partitions is a list of 200,000 views (tens of megabytes of answer) when
// copied whole (ViewQueue); here a page is at most MaxPartitionPage views,
// and EachPartition reuses one.
//
// Partitions are listed in a stable order: the order they were created in
// (their sequence numbers). A partition created while a client pages comes
// after every page it has seen; one forgotten meanwhile leaves no gap. A
// page's cursor is the id of its last partition: the next page starts after
// it, whether or not that partition still exists.

// Page sizes of the partition listings.
const (
	DefaultPartitionPage = 1000   // partitions a page holds when the request says none
	MaxPartitionPage     = 10_000 // the most a page holds, whatever the request says
)

// PageRequest selects a page of a queue's partitions: those after the
// partition After (zero: from the first), skipping Offset of them, at most
// Limit (0: DefaultPartitionPage; above MaxPartitionPage: MaxPartitionPage).
type PageRequest struct {
	After  UUID
	Offset int
	Limit  int
}

// PageLimit returns the page size a request gets for limit, given its
// default and maximum: def for 0, at most max.
func PageLimit(limit, def, max int) int {
	if limit <= 0 {
		return def
	}
	return min(limit, max)
}

// PartitionPage is a page of a queue's partitions.
type PartitionPage struct {
	Partitions []PartitionView // in creation order
	Total      int             // partitions the queue has
	Offset     int             // the position of the first listed among them, from 0
	More       bool            // partitions follow: ask again with After = the last one's ID
}

// ViewQueueHead returns a view of the named queue without its partitions
// (Partitions nil, PartitionCount set).
func (e *Engine) ViewQueueHead(name string) (QueueView, error) {
	q := e.queue(name)
	if q == nil || q.deleted.Load() {
		return QueueView{}, fmt.Errorf("%w: %q", ErrQueueNotFound, name)
	}
	return e.queueHead(q), nil
}

// QueueHeads returns a view of every queue without its partitions, by
// name.
func (e *Engine) QueueHeads() []QueueView {
	qs := e.sortedQueues()
	out := make([]QueueView, 0, len(qs))
	for _, q := range qs {
		if !q.deleted.Load() {
			out = append(out, e.queueHead(q))
		}
	}
	return out
}

func (e *Engine) sortedQueues() []*queue {
	e.mu.RLock()
	qs := make([]*queue, 0, len(e.queues))
	for _, q := range e.queues {
		qs = append(qs, q)
	}
	e.mu.RUnlock()
	sort.Slice(qs, func(i, j int) bool { return qs[i].name < qs[j].name })
	return qs
}

func (e *Engine) queueHead(q *queue) QueueView {
	v := QueueView{Name: q.name, ID: queueUUID(q.id), Created: q.created, Options: *q.options()}
	for _, g := range q.groupList() {
		if g != nil {
			v.Groups = append(v.Groups, GroupMeta{Name: g.name, Mode: g.mode, From: g.from, Created: g.created})
		}
	}
	sort.Slice(v.Groups, func(i, j int) bool { return v.Groups[i].Name < v.Groups[j].Name })
	q.mu.RLock()
	v.PartitionCount = len(q.parts) - q.holes
	q.mu.RUnlock()
	q.dlqMu.Lock()
	v.DeadLetters = len(q.dlq)
	q.dlqMu.Unlock()
	return v
}

// ViewPartitions returns a page of the named queue's partitions.
func (e *Engine) ViewPartitions(name string, r PageRequest) (PartitionPage, error) {
	q := e.queue(name)
	if q == nil || q.deleted.Load() {
		return PartitionPage{}, fmt.Errorf("%w: %q", ErrQueueNotFound, name)
	}
	if r.Offset < 0 {
		return PartitionPage{}, fmt.Errorf("%w: negative offset", ErrInvalid)
	}
	from := uint64(0)
	if r.After != (UUID{}) {
		qid, seq, ok := splitPartitionID(r.After)
		if !ok || qid != q.id {
			return PartitionPage{}, fmt.Errorf("%w: cursor %s is no partition of queue %q", ErrInvalid, r.After, name)
		}
		from = seq + 1
	}
	limit := PageLimit(r.Limit, DefaultPartitionPage, MaxPartitionPage)
	var pg PartitionPage
	parts := make([]*partition, 0, min(limit, 1024))
	q.mu.RLock()
	pg.Total = len(q.parts) - q.holes
	i := q.search(from)
	for k := 0; k < i; k++ { // the live partitions before the page's start
		if q.parts[k] != nil {
			pg.Offset++
		}
	}
	for skip := r.Offset; i < len(q.parts) && skip > 0; i++ {
		if q.parts[i] != nil {
			skip--
			pg.Offset++
		}
	}
	for ; i < len(q.parts) && len(parts) < limit; i++ {
		if p := q.parts[i]; p != nil {
			parts = append(parts, p)
		}
	}
	for ; i < len(q.parts) && !pg.More; i++ {
		pg.More = q.parts[i] != nil
	}
	q.mu.RUnlock()
	groups := q.groupsByName()
	pg.Partitions = make([]PartitionView, len(parts))
	for k, p := range parts {
		e.viewPartitionInto(p, groups, &pg.Partitions[k])
	}
	return pg, nil
}

// EachPartition calls fn with a view of every partition of the named queue,
// in creation order, until fn returns false. The view, and its Groups, are
// reused for the next partition: fn copies what it keeps. No lock is held
// while fn runs (fn may call the engine), and the queue's partition table
// is never copied whole: the walk costs a few kilobytes however many
// partitions there are.
func (e *Engine) EachPartition(name string, fn func(*PartitionView) bool) error {
	q := e.queue(name)
	if q == nil || q.deleted.Load() {
		return fmt.Errorf("%w: %q", ErrQueueNotFound, name)
	}
	groups := q.groupsByName()
	var pv PartitionView
	q.eachPartition(func(p *partition) bool {
		e.viewPartitionInto(p, groups, &pv)
		return fn(&pv)
	})
	return nil
}

// ViewPartition returns a view of one partition of a queue.
func (e *Engine) ViewPartition(queueName, partName string) (PartitionView, error) {
	q := e.queue(queueName)
	if q == nil || q.deleted.Load() {
		return PartitionView{}, fmt.Errorf("%w: %q", ErrQueueNotFound, queueName)
	}
	p := q.partition(partName)
	if p == nil {
		return PartitionView{}, fmt.Errorf("%w: %s/%s", ErrPartitionNotFound, queueName, partName)
	}
	var pv PartitionView
	e.viewPartitionInto(p, q.groupsByName(), &pv)
	return pv, nil
}

// ViewPartitionByID returns a view of the partition with that id, and its
// queue's name.
func (e *Engine) ViewPartitionByID(id UUID) (string, PartitionView, error) {
	p := e.partitionByID(id)
	if p == nil {
		return "", PartitionView{}, fmt.Errorf("%w: no partition %s", ErrPartitionNotFound, id)
	}
	var pv PartitionView
	e.viewPartitionInto(p, p.q.groupsByName(), &pv)
	return p.q.name, pv, nil
}

// eachPartition calls fn with each live partition of q in sequence order
// until it returns false. It copies at most a chunk of pointers at a time
// under q.mu and holds no lock while fn runs; a walk resumes after the last
// sequence number it saw, so partitions created or forgotten meanwhile (and
// the table's compaction) never make it skip or repeat one.
func (q *queue) eachPartition(fn func(*partition) bool) { q.eachPartitionFrom(0, fn) }

// eachPartitionFrom is eachPartition starting at sequence number next.
func (q *queue) eachPartitionFrom(next uint64, fn func(*partition) bool) {
	var chunk [256]*partition
	for {
		n := 0
		q.mu.RLock()
		i := q.search(next)
		for ; i < len(q.parts) && n < len(chunk); i++ {
			if p := q.parts[i]; p != nil {
				chunk[n] = p
				n++
			}
		}
		more := i < len(q.parts)
		q.mu.RUnlock()
		for _, p := range chunk[:n] {
			if !fn(p) {
				return
			}
		}
		if !more || n == 0 {
			return
		}
		next = chunk[n-1].seq + 1
		clear(chunk[:n])
	}
}

// groupsByName returns q's live groups sorted by name (a partition's view
// lists its groups in this order).
func (q *queue) groupsByName() []*group {
	var out []*group
	for _, g := range q.groupList() {
		if g != nil {
			out = append(out, g)
		}
	}
	slices.SortFunc(out, func(a, b *group) int { return strings.Compare(a.name, b.name) })
	return out
}

// viewPartitionInto fills pv with a view of p, reusing pv.Groups; groups
// are the queue's groups in the order to list them.
func (e *Engine) viewPartitionInto(p *partition, groups []*group, pv *PartitionView) {
	st := p.st()
	st.mu.Lock()
	defer st.mu.Unlock()
	*pv = PartitionView{Name: p.name, ID: p.id(), Low: p.low(), Next: p.next, Durable: p.durable, Groups: pv.Groups[:0], Lost: p.lostRanges()}
	if len(p.chunks) > 0 {
		pv.Oldest, pv.Newest = p.chunks[0].ts, p.lastTS
	}
	for _, g := range groups {
		if g.idx >= len(p.groups) || !p.groups[g.idx].init() {
			continue
		}
		pg := &p.groups[g.idx]
		gs := GroupState{Group: g.name, Cursor: pg.cursor}
		if pg.cursor < p.next {
			if ci := p.chunkFor(pg.cursor); ci >= 0 {
				gs.CursorTime = p.chunks[ci].ts
			}
		}
		if a := pg.act; a != nil {
			if l := a.lease; l != nil && !l.ended {
				gs.Leased, gs.LeaseID, gs.LeaseExpires = true, l.id, l.expires
				gs.LeaseFrom, gs.LeaseTo, gs.LeaseAcked = l.from, l.to, l.nDone
			}
			gs.Retrying = len(a.retries)
			gs.BlockedUntil = a.blockedUntil
		}
		pv.Groups = append(pv.Groups, gs)
	}
}

// MessageRef names a message by its partition and offset.
type MessageRef struct {
	Partition UUID
	Offset    uint64
}

// DeadLetterRefs returns the messages of the named queue that have
// dead-letter entries, sorted by partition id and offset (a message filed
// by two groups is listed twice). No payload is read: a listing tells a
// dead-lettered message by it at 24 bytes an entry.
func (e *Engine) DeadLetterRefs(queueName string) []MessageRef {
	q := e.queue(queueName)
	if q == nil {
		return nil
	}
	q.dlqMu.Lock()
	out := make([]MessageRef, len(q.dlq))
	for i := range q.dlq {
		d := &q.dlq[i]
		out[i] = MessageRef{d.p.id(), d.off}
	}
	q.dlqMu.Unlock()
	slices.SortFunc(out, compareRefs)
	return out
}

func compareRefs(a, b MessageRef) int {
	if c := slices.Compare(a.Partition[:], b.Partition[:]); c != 0 {
		return c
	}
	switch {
	case a.Offset < b.Offset:
		return -1
	case a.Offset > b.Offset:
		return 1
	}
	return 0
}

// HasRef reports whether refs (sorted, from DeadLetterRefs) holds r.
func HasRef(refs []MessageRef, r MessageRef) bool {
	_, ok := slices.BinarySearchFunc(refs, r, compareRefs)
	return ok
}

// DeadLetterCounts returns how many dead-letter entries each of the given
// partitions of the named queue has, in the order given, reading no
// payload.
func (e *Engine) DeadLetterCounts(queueName string, partitions []UUID) []int {
	out := make([]int, len(partitions))
	q := e.queue(queueName)
	if q == nil || len(partitions) == 0 {
		return out
	}
	at := make(map[uint64]int, len(partitions))
	for i, id := range partitions {
		if qid, seq, ok := splitPartitionID(id); ok && qid == q.id {
			at[seq] = i
		}
	}
	q.dlqMu.Lock()
	defer q.dlqMu.Unlock()
	for i := range q.dlq {
		if k, ok := at[q.dlq[i].p.seq]; ok {
			out[k]++
		}
	}
	return out
}

// DeadLetterPartitions returns how many partitions of the named queue have
// dead-letter entries.
func (e *Engine) DeadLetterPartitions(queueName string) int {
	q := e.queue(queueName)
	if q == nil {
		return 0
	}
	q.dlqMu.Lock()
	seqs := make([]uint64, len(q.dlq))
	for i := range q.dlq {
		seqs[i] = q.dlq[i].p.seq
	}
	q.dlqMu.Unlock()
	slices.Sort(seqs)
	return len(slices.Compact(seqs))
}

// DeadLetterOf returns the dead-letter entry of the message at offset off
// of a partition (the latest filed, when several groups filed it), without
// its payload.
func (e *Engine) DeadLetterOf(partitionID UUID, off uint64) (DLQEntry, bool) {
	p := e.partitionByID(partitionID)
	if p == nil {
		return DLQEntry{}, false
	}
	q := p.q
	q.dlqMu.Lock()
	defer q.dlqMu.Unlock()
	for i := len(q.dlq) - 1; i >= 0; i-- {
		if d := &q.dlq[i]; d.p == p && d.off == off {
			m := Message{ID: d.m.id, TransactionID: d.m.txnID(), TraceID: d.m.trace, CreatedAt: d.m.ts,
				Queue: q.name, Partition: p.name, PartitionID: partitionID, Offset: off, ProducerSub: d.m.sub,
				Group: d.group, RetryCount: d.retries}
			return DLQEntry{ID: d.id, Message: m, Error: d.err, RetryCount: d.retries, FailedAt: d.failedAt}, true
		}
	}
	return DLQEntry{}, false
}
