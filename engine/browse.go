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

// Browsing reads a queue's messages by offset without leasing them (the
// binary protocol's Browse, the command line's peek): it creates nothing,
// takes no lease, moves no cursor, warms no cache and writes nothing to the
// journal. A partition is read a push record at a time under its stripe
// lock, as ScanMessages does (a record not in memory is read back from the
// journal, and not kept); payloads are opened and cut without it.

// BrowseStart says where a browse starts reading each partition.
type BrowseStart uint8

const (
	// BrowseFrom starts each partition at offset BrowseRequest.N.
	BrowseFrom BrowseStart = iota
	// BrowseLast starts each partition at its last N offsets held (N >= 1).
	BrowseLast
)

// Page sizes of a browse, in entries (messages and gaps).
const (
	DefaultBrowsePage = 100
	MaxBrowsePage     = 10_000
)

// BrowseGapOverhead is what BrowseRequest.MaxBytes counts for a gap beyond
// its partition's name (the binary protocol's fixed fields take 47 bytes:
// protocol.MaxBrowseGapFixed).
const BrowseGapOverhead = 64

// BrowseRequest selects the messages of a browse.
type BrowseRequest struct {
	Queue     string
	Partition string // "" = every partition, in the order they were created
	Start     BrowseStart
	N         uint64 // BrowseFrom: the first offset; BrowseLast: how many
	// Resume continues a page cut short: the partition (BrowsePage's
	// NextPartition) is read from ResumeOffset, the partitions after it as
	// Start says. Zero: from the first partition.
	Resume       UUID
	ResumeOffset uint64
	// Limit caps the entries (messages and gaps) of the page: 0 means
	// DefaultBrowsePage, and above MaxBrowsePage it is MaxBrowsePage.
	Limit int
	// MaxBytes bounds the page by size: entries are taken while their
	// sizes add up to at most MaxBytes (a message as MessageBytes counts
	// it, its payload as shown, and its PayloadErr text; a gap as
	// BrowseGapOverhead and its partition's name). The first entry is
	// always taken: a message that alone does not fit gets its payload cut
	// to fit. 0 means no bound but Limit.
	MaxBytes int
	// MaxPayload cuts each payload to at most this many bytes (0: whole).
	MaxPayload int
}

// GapReason says why offsets of a partition are not listed.
type GapReason uint8

const (
	GapRetention  GapReason = iota + 1 // removed by retention: below the oldest offset held
	GapLost                            // lost to journal damage (a salvaged start skipped them)
	GapUnreadable                      // their journal entry cannot be read back (ErrUnreadable)
	GapDeleted                         // tombstoned one by one (DeleteMessage)
)

func (g GapReason) String() string {
	switch g {
	case GapRetention:
		return "retention"
	case GapLost:
		return "lost"
	case GapUnreadable:
		return "unreadable"
	case GapDeleted:
		return "deleted"
	}
	return "unknown"
}

// BrowseMessage is a message as a browse lists it: LeaseID, Group and
// RetryCount are not set. Payload may be cut (BrowseRequest.MaxPayload and
// MaxBytes): Size is the whole payload's length (0 with PayloadErr).
type BrowseMessage struct {
	Message
	Size int
}

// BrowseGap is a run of offsets of a partition that a browse passed over
// without listing messages, and why. Before places it among the page's
// messages: it comes before Messages[Before] (after the last when Before
// is their count).
type BrowseGap struct {
	Before      int
	Partition   string
	PartitionID UUID
	First, Last uint64 // inclusive
	Reason      GapReason
}

// BrowsePage is a page of a browse.
type BrowsePage struct {
	Messages []BrowseMessage // each partition's oldest first, partitions in creation order
	Gaps     []BrowseGap
	// More: entries follow (when the page was read). Ask again with
	// Resume = NextPartition and ResumeOffset = NextOffset.
	More          bool
	NextPartition UUID
	NextOffset    uint64
}

// Browse reads a page of a queue's committed messages, by offset, without
// leasing them. It fails with ErrQueueNotFound, ErrPartitionNotFound, or
// ErrInvalid for a bad start or resume point. Each partition is read
// consistently a push record at a time; a push committed while a browse
// runs may or may not be in its page, and is in the next one if not.
func (e *Engine) Browse(r BrowseRequest) (BrowsePage, error) {
	q := e.queue(r.Queue)
	if q == nil || q.deleted.Load() {
		return BrowsePage{}, fmt.Errorf("%w: %q", ErrQueueNotFound, r.Queue)
	}
	switch {
	case r.Start > BrowseLast:
		return BrowsePage{}, fmt.Errorf("%w: browse start %d", ErrInvalid, r.Start)
	case r.Start == BrowseLast && r.N == 0:
		return BrowsePage{}, fmt.Errorf("%w: the last 0 messages: ask for at least 1", ErrInvalid)
	case r.MaxBytes < 0 || r.MaxPayload < 0:
		return BrowsePage{}, fmt.Errorf("%w: negative byte bound", ErrInvalid)
	}
	var only *partition
	if r.Partition != "" {
		if only = q.partition(r.Partition); only == nil {
			return BrowsePage{}, fmt.Errorf("%w: %s/%s", ErrPartitionNotFound, r.Queue, r.Partition)
		}
	}
	resume, from := r.Resume != (UUID{}), uint64(0)
	if resume {
		qid, seq, ok := splitPartitionID(r.Resume)
		switch {
		case !ok || qid != q.id:
			return BrowsePage{}, fmt.Errorf("%w: resume point %s is no partition of queue %q", ErrInvalid, r.Resume, r.Queue)
		case only != nil && seq != only.seq:
			return BrowsePage{}, fmt.Errorf("%w: resume point %s is not partition %s/%s", ErrInvalid, r.Resume, r.Queue, r.Partition)
		}
		from = seq
	}
	b := browser{e: e, r: &r, limit: PageLimit(r.Limit, DefaultBrowsePage, MaxBrowsePage), left: r.MaxBytes}
	if only != nil {
		b.partition(only, resume)
	} else {
		q.eachPartitionFrom(from, func(p *partition) bool {
			return b.partition(p, resume && p.seq == from)
		})
	}
	return b.page, nil
}

// browser fills one BrowsePage.
type browser struct {
	e     *Engine
	r     *BrowseRequest
	limit int
	left  int // bytes left under MaxBytes (when it is set)
	page  BrowsePage
	buf   []msg
}

func (b *browser) entries() int { return len(b.page.Messages) + len(b.page.Gaps) }

// full reports whether an entry of cost bytes is left out of the page (the
// first entry never is).
func (b *browser) full(cost int) bool {
	n := b.entries()
	return n > 0 && (n >= b.limit || (b.r.MaxBytes > 0 && cost > b.left))
}

// stop ends the page before offset off of partition pid.
func (b *browser) stop(pid UUID, off uint64) bool {
	b.page.More, b.page.NextPartition, b.page.NextOffset = true, pid, off
	return false
}

// partition lists p's entries; resume says p is the resume point. It
// returns false once the page is full.
func (b *browser) partition(p *partition, resume bool) bool {
	st, pid := p.st(), p.id()
	var next uint64
	for started := false; ; {
		st.mu.Lock()
		low, durable := p.low(), p.durable
		if !started {
			started = true
			switch {
			case resume:
				next = b.r.ResumeOffset
			case b.r.Start == BrowseLast:
				next = low
				if durable > low && durable-low > b.r.N {
					next = durable - b.r.N
				}
			default:
				next = b.r.N
			}
		}
		if next >= durable {
			st.mu.Unlock()
			return true
		}
		if next < low {
			st.mu.Unlock()
			if !b.gap(p, pid, next, low-1, GapRetention) {
				return false
			}
			next = low
			continue
		}
		ci := p.chunkFor(next) // >= 0: next is at or above the first chunk's first offset
		end := min(p.chunkEnd(ci), durable)
		if p.chunks[ci].pos == lostPos {
			st.mu.Unlock()
			if !b.gap(p, pid, next, end-1, GapLost) {
				return false
			}
			next = end
			continue
		}
		// What the page may still take (one more, to tell whether there is
		// more): a browse reads no further.
		to := min(end, next+uint64(max(b.limit-b.entries(), 1)))
		var err error
		b.buf, err = b.e.msgsRange(p, next, to, b.buf[:0])
		st.mu.Unlock()
		if err != nil { // a record that went bad: that chunk's offsets only
			if !b.gap(p, pid, next, end-1, GapUnreadable) {
				return false
			}
			next = end
			continue
		}
		for i := range b.buf {
			off := next + uint64(i)
			if p.q.tombstoned(p, off) {
				if !b.gap(p, pid, off, off, GapDeleted) {
					return false
				}
				continue
			}
			if !b.message(p, pid, off, &b.buf[i]) {
				return false
			}
		}
		clear(b.buf) // keep no payloads alive
		next = to
	}
}

// gap lists offsets [first, last] of p as passed over, merged with the
// page's last gap when it continues it.
func (b *browser) gap(p *partition, pid UUID, first, last uint64, why GapReason) bool {
	if n := len(b.page.Gaps); n > 0 {
		if g := &b.page.Gaps[n-1]; g.PartitionID == pid && g.Reason == why && g.Last+1 == first && g.Before == len(b.page.Messages) {
			g.Last = last
			return true
		}
	}
	cost := BrowseGapOverhead + len(p.name)
	if b.full(cost) {
		return b.stop(pid, first)
	}
	b.left -= cost
	b.page.Gaps = append(b.page.Gaps, BrowseGap{Before: len(b.page.Messages), Partition: p.name, PartitionID: pid,
		First: first, Last: last, Reason: why})
	return true
}

// message lists p's message m at offset off.
func (b *browser) message(p *partition, pid UUID, off uint64, m *msg) bool {
	shown := len(m.payload) // as stored: a sealed payload is a little longer than it opens to
	if b.r.MaxPayload > 0 {
		shown = min(shown, b.r.MaxPayload)
	}
	fixed := msgBytes(0, len(m.txnID()), len(m.trace), len(p.name), 0)
	if b.full(fixed + shown) {
		return b.stop(pid, off)
	}
	out, err := b.e.message(p, off, m, nil)
	size := len(out.Payload)
	if err != nil { // listed as unreadable: the message does not open (ErrEncryption)
		out, size = messageMeta(p, off, m, err), 0
		fixed += len(err.Error())
	}
	out.PartitionID = pid
	pl := out.Payload
	if b.r.MaxPayload > 0 && len(pl) > b.r.MaxPayload {
		pl = pl[:b.r.MaxPayload]
	}
	if b.r.MaxBytes > 0 && fixed+len(pl) > b.left {
		if b.entries() > 0 {
			return b.stop(pid, off)
		}
		pl = pl[:max(0, min(len(pl), b.left-fixed))] // the first entry: cut to fit
	}
	out.Payload = pl
	b.left -= fixed + len(pl)
	b.page.Messages = append(b.page.Messages, BrowseMessage{Message: out, Size: size})
	return true
}
