package engine

import (
	"errors"
	"fmt"
	"sort"
)

// Read-only views for reports: the HTTP bridge's resource, status, message
// and consumer-group routes read the broker's state through these (and
// through the paged and streamed views of pages.go). Each view is a copy
// taken partition by partition under that partition's stripe lock:
// consistent per partition, not across partitions. Nothing here changes
// state or writes to the journal.

// QueueView is a picture of one queue: its options, its consumer groups and,
// per partition, every group's position.
type QueueView struct {
	Name           string
	ID             UUID
	Created        int64 // Unix nanoseconds
	Options        QueueOptions
	Groups         []GroupMeta     // by name
	Partitions     []PartitionView // nil in a head (ViewQueueHead, QueueHeads)
	PartitionCount int
	DeadLetters    int
}

// GroupMeta describes a consumer group's subscription on one queue.
type GroupMeta struct {
	Name    string
	Mode    SubMode
	From    int64 // SubNew: when the group appeared; SubFrom: the timestamp (Unix nanoseconds)
	Created int64
}

// PartitionView is a picture of one partition.
type PartitionView struct {
	Name    string
	ID      UUID
	Low     uint64 // oldest offset held
	Next    uint64 // offset the next message gets
	Durable uint64 // offsets below this are committed (visible to pops)
	Oldest  int64  // createdAt of the oldest message held; 0 when empty
	Newest  int64
	Groups  []GroupState // the groups that have a cursor on this partition, by name
	// Lost lists the offsets lost to journal damage (a salvage skipped the
	// entries that held them): consumers pass over them (damage.go).
	Lost []OffsetRange
}

// GroupState is one consumer group's position on one partition.
type GroupState struct {
	Group      string
	Cursor     uint64 // first offset not finished
	CursorTime int64  // createdAt of the message at the cursor; 0 when none is there
	// The live lease, if any: messages [LeaseFrom, LeaseTo), LeaseAcked of
	// them acked so far.
	Leased       bool
	LeaseID      UUID
	LeaseFrom    uint64
	LeaseTo      uint64
	LeaseAcked   int
	LeaseExpires int64
	Retrying     int   // messages with failed acks counted
	BlockedUntil int64 // a failed message waits out its retry delay until then
}

// ViewQueues returns a view of every queue, by name, with every partition
// of each: its memory grows with the partitions of the whole broker. The
// transports use QueueHeads and EachPartition instead; this is for tests
// and tools.
func (e *Engine) ViewQueues() []QueueView {
	e.mu.RLock()
	qs := make([]*queue, 0, len(e.queues))
	for _, q := range e.queues {
		qs = append(qs, q)
	}
	e.mu.RUnlock()
	sort.Slice(qs, func(i, j int) bool { return qs[i].name < qs[j].name })
	out := make([]QueueView, 0, len(qs))
	for _, q := range qs {
		if !q.deleted.Load() {
			out = append(out, e.viewQueue(q))
		}
	}
	return out
}

// ViewQueue returns a view of the named queue with every partition: its
// memory grows with the queue (a queue of 200,000 partitions is 200,000
// views). The transports page (ViewPartitions) or stream (EachPartition)
// instead; this is for tests and tools.
func (e *Engine) ViewQueue(name string) (QueueView, error) {
	q := e.queue(name)
	if q == nil || q.deleted.Load() {
		return QueueView{}, fmt.Errorf("%w: %q", ErrQueueNotFound, name)
	}
	return e.viewQueue(q), nil
}

func (e *Engine) viewQueue(q *queue) QueueView {
	v := e.queueHead(q)
	groups := q.groupsByName()
	q.eachPartition(func(p *partition) bool {
		v.Partitions = append(v.Partitions, PartitionView{})
		e.viewPartitionInto(p, groups, &v.Partitions[len(v.Partitions)-1])
		return true
	})
	v.PartitionCount = len(v.Partitions)
	return v
}

// ScanMessages calls fn with the committed messages of queueName/partName,
// oldest first, starting at the first one created at or after since (0:
// the oldest held) and stopping after the last one created at or before
// until (0: the newest), or when fn returns false. The messages are read a
// push record at a time under the partition's lock and handed to fn without
// it; fn must not modify their payloads. LeaseID and Group are not set. A
// message whose payload does not open (no key given opens it) is handed to
// fn without its payload, with PayloadErr saying why.
func (e *Engine) ScanMessages(queueName, partName string, since, until int64, fn func(*Message) bool) error {
	q := e.queue(queueName)
	if q == nil || q.deleted.Load() {
		return fmt.Errorf("%w: %q", ErrQueueNotFound, queueName)
	}
	p := q.partition(partName)
	if p == nil {
		return fmt.Errorf("%w: %s/%s", ErrPartitionNotFound, queueName, partName)
	}
	pid := p.id()
	st := p.st()
	var buf []msg
	next, started := uint64(0), false
	for {
		st.mu.Lock()
		var ci int
		if !started {
			ci = sort.Search(len(p.chunks), func(i int) bool { return p.chunks[i].ts >= since })
			started = true
		} else if ci = p.chunkFor(next); ci < 0 {
			ci = 0 // retention dropped what came next: go on from the oldest held
		}
		if ci >= len(p.chunks) || (until != 0 && p.chunks[ci].ts > until) {
			st.mu.Unlock()
			return nil
		}
		from := max(next, p.chunks[ci].first)
		end := min(p.chunkEnd(ci), p.durable)
		if from >= end {
			st.mu.Unlock()
			return nil
		}
		if p.chunks[ci].pos == lostPos { // lost to journal damage: nothing to list
			st.mu.Unlock()
			next = end
			continue
		}
		var err error
		buf, err = e.msgsRange(p, from, end, buf[:0])
		st.mu.Unlock()
		if err != nil {
			return err
		}
		for i := range buf {
			if p.q.tombstoned(p, from+uint64(i)) {
				continue
			}
			out, err := e.message(p, from+uint64(i), &buf[i], nil)
			if errors.Is(err, ErrEncryption) {
				out = messageMeta(p, from+uint64(i), &buf[i], err) // listed as unreadable
			} else if err != nil {
				return err
			}
			out.PartitionID = pid
			if !fn(&out) {
				return nil
			}
		}
		next = end
	}
}

// FindMessage returns the message of a partition named by its
// transactionId (for a message pushed without one, its id), as Queen's
// HTTP routes name messages. It fails with ErrMessageNotFound.
func (e *Engine) FindMessage(partitionID UUID, txn string) (Message, error) {
	p := e.partitionByID(partitionID)
	if p == nil {
		return Message{}, fmt.Errorf("%w: no partition %s", ErrMessageNotFound, partitionID)
	}
	st := p.st()
	st.mu.Lock()
	defer st.mu.Unlock()
	off, ok := e.findTxn(p, txn, 0)
	if !ok {
		id, err := ParseUUID(txn)
		if err != nil {
			return Message{}, fmt.Errorf("%w: transactionId %q in %s/%s", ErrMessageNotFound, txn, p.q.name, p.name)
		}
		if off, ok = e.findByID(p, id); !ok {
			return Message{}, fmt.Errorf("%w: id %s in %s/%s", ErrMessageNotFound, id, p.q.name, p.name)
		}
	}
	if off < p.low() || off >= p.durable || p.q.tombstoned(p, off) {
		return Message{}, fmt.Errorf("%w: transactionId %q in %s/%s", ErrMessageNotFound, txn, p.q.name, p.name)
	}
	m, err := e.msgAt(p, off)
	if err != nil {
		return Message{}, err
	}
	return e.message(p, off, &m, nil)
}

// findByID looks for a message by its UUIDv7 id. The id's millisecond
// timestamp was taken just before the message's push record was stamped, so
// only the records stamped within a window around it are read. Caller holds
// p's stripe.
func (e *Engine) findByID(p *partition, id UUID) (uint64, bool) {
	if id[6]>>4 != 7 {
		return 0, false
	}
	ms := int64(id[0])<<40 | int64(id[1])<<32 | int64(id[2])<<24 | int64(id[3])<<16 | int64(id[4])<<8 | int64(id[5])
	const window = int64(10e9) // 10 s either side
	lo, hi := ms*1e6-window, ms*1e6+window
	var buf [64]msg
	for ci := sort.Search(len(p.chunks), func(i int) bool { return p.chunks[i].ts >= lo }); ci < len(p.chunks) && p.chunks[ci].ts <= hi; ci++ {
		first, end := p.chunks[ci].first, p.chunkEnd(ci)
		if p.chunks[ci].pos == lostPos {
			continue
		}
		got, err := e.msgsRange(p, first, end, buf[:0])
		if err != nil {
			return 0, false
		}
		for i := range got {
			if got[i].id == id {
				return first + uint64(i), true
			}
		}
	}
	return 0, false
}

// PartitionByID returns the queue and partition names of a partition id.
func (e *Engine) PartitionByID(id UUID) (queueName, partName string, err error) {
	p := e.partitionByID(id)
	if p == nil {
		return "", "", fmt.Errorf("%w: no partition %s", ErrPartitionNotFound, id)
	}
	return p.q.name, p.name, nil
}

// NewID returns a fresh UUIDv7 from the engine's generator (ids of
// transactions and traces made by transports).
func (e *Engine) NewID() UUID { return e.ids.next(e.clock.Now()) }

// Now returns the engine's clock reading, in Unix nanoseconds.
func (e *Engine) Now() int64 { return e.clock.Now() }

// Healthy reports why the engine refuses changes (closed, or its journal
// failed or is full), or why its journal is stuck (Config.JournalStallAfter),
// or nil.
func (e *Engine) Healthy() error {
	if err := e.check(); err != nil {
		return err
	}
	if err := e.j.Stalled(e.cfg.JournalStallAfter); err != nil {
		return fmt.Errorf("%w: %w", ErrJournal, err)
	}
	return nil
}

// LiveLease returns the id of the live lease of group on a partition, if
// there is one (the HTTP bridge matches it against the leases a Queen
// transaction names in requiredLeases).
func (e *Engine) LiveLease(partitionID UUID, groupName string) (UUID, bool) {
	p := e.partitionByID(partitionID)
	if p == nil {
		return UUID{}, false
	}
	if groupName == "" {
		groupName = QueueModeGroup
	}
	g := p.q.group(groupName)
	if g == nil {
		return UUID{}, false
	}
	st := p.st()
	st.mu.Lock()
	defer st.mu.Unlock()
	if g.idx >= len(p.groups) {
		return UUID{}, false
	}
	if a := p.groups[g.idx].act; a != nil && a.lease != nil && !a.lease.ended {
		return a.lease.id, true
	}
	return UUID{}, false
}
