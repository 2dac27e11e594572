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

func (e *Engine) queueInfo(q *queue, detail bool) QueueInfo {
	qi := QueueInfo{Name: q.name, ID: partitionID(q.id, 0), Created: q.created, Options: *q.options()}
	groups := q.groupList()
	for _, g := range groups {
		if g != nil {
			qi.Groups = append(qi.Groups, g.name)
		}
	}
	sort.Strings(qi.Groups)
	q.eachPartition(func(p *partition) bool {
		qi.Partitions++
		p.st().mu.Lock()
		low := p.low()
		qi.Messages += p.next - low
		if p.lost > 0 {
			n := p.lostCount()
			qi.LostMessages += n
			qi.Messages -= n // held: lost offsets are not
		}
		if detail {
			pi := PartitionInfo{Name: p.name, ID: p.id(), Low: low, Next: p.next, Lost: p.lostRanges()}
			if len(p.chunks) > 0 {
				pi.Oldest, pi.Newest = p.chunks[0].ts, p.lastTS
			}
			for _, g := range groups {
				if g == nil || g.idx >= len(p.groups) || !p.groups[g.idx].init() {
					continue
				}
				pg := &p.groups[g.idx]
				gc := GroupCursor{Group: g.name, Cursor: pg.cursor}
				if p.next > pg.cursor {
					gc.Lag = p.next - pg.cursor
				}
				if a := pg.act; a != nil {
					if l := a.lease; l != nil {
						gc.Leased, gc.LeaseID, gc.LeaseExpires = true, l.id, l.expires
					}
					gc.BlockedUntil = a.blockedUntil
					gc.Retrying = len(a.retries)
				}
				pi.Groups = append(pi.Groups, gc)
			}
			qi.PartitionList = append(qi.PartitionList, pi)
		}
		p.st().mu.Unlock()
		return true
	})
	q.dlqMu.Lock()
	qi.DeadLetters = len(q.dlq)
	q.dlqMu.Unlock()
	return qi
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
}

// Stats returns the engine's counters.
func (e *Engine) Stats() Stats {
	e.mu.RLock()
	n := len(e.queues)
	e.mu.RUnlock()
	return Stats{
		Queues:       n,
		Pushed:       e.stats.pushed.Load(),
		Popped:       e.stats.popped.Load(),
		Acked:        e.stats.acked.Load(),
		DeadLettered: e.stats.deadLettered.Load(),
		Retained:     e.stats.retained.Load(),
		Evicted:      e.stats.evicted.Load(),
		CacheBytes:   e.cacheBytes.Load(),
		ReadErrors:   e.stats.readErrors.Load(),
	}
}

// QueueEncrypted reports whether the named queue seals its payloads at rest.
func (e *Engine) QueueEncrypted(name string) bool {
	q := e.queue(name)
	return q != nil && q.options().EncryptionEnabled
}
