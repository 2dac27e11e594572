package engine

import (
	"fmt"
	"sort"
)

// GroupCursor is a consumer group's position on one partition.
type GroupCursor struct {
	Group        string
	Cursor       uint64 // first offset not finished
	Lag          uint64 // messages from the cursor to the end
	Leased       bool
	LeaseID      UUID
	LeaseExpires int64
	BlockedUntil int64 // a failed message waits out its retry delay
	Retrying     int   // messages with failed acks counted
}

// PartitionInfo describes one partition.
type PartitionInfo struct {
	Name     string
	ID       UUID
	Low      uint64 // oldest offset held
	Next     uint64 // offset of the next message
	Oldest   int64  // createdAt of the oldest message held (0 if none)
	Newest   int64
	Groups   []GroupCursor
	CreateTS int64
	// Lost lists the offsets lost to journal damage (a salvage skipped
	// them; see damage.go), until retention removes them.
	Lost []OffsetRange
}

// QueueInfo describes a queue.
type QueueInfo struct {
	Name          string
	ID            UUID
	Created       int64
	Options       QueueOptions
	Partitions    int
	Messages      uint64 // messages held
	Groups        []string
	DeadLetters   int
	LostMessages  uint64          // offsets lost to journal damage (PartitionInfo.Lost)
	PartitionList []PartitionInfo // only from Queue
}

// Queues lists every queue (without partition details), by name. A queue's
// figures are summed one partition at a time: nothing grows with the number
// of partitions.
func (e *Engine) Queues() []QueueInfo {
	e.mu.RLock()
	qs := make([]*queue, 0, len(e.queues))
	for _, q := range e.queues {
		qs = append(qs, q)
	}
	e.mu.RUnlock()
	sort.Slice(qs, func(i, j int) bool { return qs[i].name < qs[j].name })
	out := make([]QueueInfo, len(qs))
	for i, q := range qs {
		out[i] = e.queueInfo(q, false)
	}
	return out
}

// Queue describes one queue with its partitions and group cursors: its
// memory grows with the queue. The transports use QueueSummary and the
// paged views (ViewPartitions) instead; this is for tests and tools.
func (e *Engine) Queue(name string) (QueueInfo, error) {
	q := e.queue(name)
	if q == nil {
		return QueueInfo{}, fmt.Errorf("%w: %q", ErrQueueNotFound, name)
	}
	return e.queueInfo(q, true), nil
}

// QueueSummary describes one queue without its partitions (PartitionList
// nil), summing its figures one partition at a time.
func (e *Engine) QueueSummary(name string) (QueueInfo, error) {
	q := e.queue(name)
	if q == nil {
		return QueueInfo{}, fmt.Errorf("%w: %q", ErrQueueNotFound, name)
	}
	return e.queueInfo(q, false), nil
}

// queueInfo builds a QueueInfo from the browse views (browse.go, pages.go):
// the queue's head, then one partition view at a time (reused), summed; with
// detail, each partition's view is kept as a PartitionInfo. A summary reads
// no group state.
func (e *Engine) queueInfo(q *queue, detail bool) QueueInfo {
	v := e.queueHead(q)
	qi := QueueInfo{Name: v.Name, ID: v.ID, Created: v.Created, Options: v.Options, DeadLetters: v.DeadLetters}
	for _, g := range v.Groups {
		qi.Groups = append(qi.Groups, g.Name)
	}
	var groups []*group // a partition's groups, in the order QueueInfo lists them
	if detail {
		for _, g := range q.groupList() {
			if g != nil {
				groups = append(groups, g)
			}
		}
	}
	var pv PartitionView
	q.eachPartition(func(p *partition) bool {
		e.viewPartitionInto(p, groups, &pv)
		qi.Partitions++
		qi.Messages += pv.Next - pv.Low
		for _, r := range pv.Lost {
			n := r.Last - r.First + 1
			qi.LostMessages += n
			qi.Messages -= n // held: lost offsets are not
		}
		if detail {
			qi.PartitionList = append(qi.PartitionList, partitionInfo(&pv))
		}
		return true
	})
	return qi
}

// partitionInfo is the PartitionInfo of a partition's view.
func partitionInfo(pv *PartitionView) PartitionInfo {
	pi := PartitionInfo{Name: pv.Name, ID: pv.ID, Low: pv.Low, Next: pv.Next, Oldest: pv.Oldest, Newest: pv.Newest, Lost: pv.Lost}
	for i := range pv.Groups {
		gs := &pv.Groups[i]
		gc := GroupCursor{Group: gs.Group, Cursor: gs.Cursor, Leased: gs.Leased, LeaseID: gs.LeaseID, LeaseExpires: gs.LeaseExpires,
			BlockedUntil: gs.BlockedUntil, Retrying: gs.Retrying}
		if pv.Next > gs.Cursor {
			gc.Lag = pv.Next - gs.Cursor
		}
		pi.Groups = append(pi.Groups, gc)
	}
	return pi
}

// Stats are engine-wide counters since start.
type Stats struct {
	Queues       int
	Pushed       uint64
	Popped       uint64
	Acked        uint64 // acks that completed or failed messages, and autoAck deliveries
	DeadLettered uint64
	Retained     uint64 // messages removed by retention
	Evicted      uint64 // of them, messages some group never consumed
	CacheBytes   int64
	ReadErrors   uint64 // messages that could not be read back from the journal (damage found after start)
	// AckFailed counts, of Acked, the acks other than completed (failed,
	// retry, dlq); RetentionCuts the removals by retention (one partition's
	// oldest messages each); PopLag* how long popped messages had waited
	// since their createdAt (flow.go; QueueFlows has them per queue).
	AckFailed     uint64
	RetentionCuts uint64
	PopLagCount   uint64
	PopLagSumMs   uint64
	PopLagMax     LagMaxes
}

// Stats returns the engine's counters.
func (e *Engine) Stats() Stats {
	e.mu.RLock()
	n := len(e.queues)
	e.mu.RUnlock()
	st := Stats{
		Queues:        n,
		Pushed:        e.stats.pushed.Load(),
		Popped:        e.stats.popped.Load(),
		Acked:         e.stats.acked.Load(),
		DeadLettered:  e.stats.deadLettered.Load(),
		Retained:      e.stats.retained.Load(),
		Evicted:       e.stats.evicted.Load(),
		CacheBytes:    e.cacheBytes.Load(),
		ReadErrors:    e.stats.readErrors.Load(),
		AckFailed:     e.stats.ackFailed.Load(),
		RetentionCuts: e.stats.retentionCuts.Load(),
	}
	st.PopLagCount, st.PopLagSumMs, st.PopLagMax = e.stats.lag.read()
	return st
}

// QueueEncrypted reports whether the named queue seals its payloads at rest.
func (e *Engine) QueueEncrypted(name string) bool {
	q := e.queue(name)
	return q != nil && q.options().EncryptionEnabled
}
