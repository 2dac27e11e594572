package engine

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
)

// UUID is a 16-byte identifier: message ids and lease ids are UUIDv7 (time
// ordered), partition ids are UUIDv8 built from the queue id and the
// partition's sequence number inside the queue, and a queue's own UUID is
// built the same way from a sequence number no partition gets (queueSeq).
type UUID [16]byte

// IsZero reports whether u is the zero UUID (no id given).
func (u UUID) IsZero() bool { return u == UUID{} }

// String formats u in the canonical 8-4-4-4-12 form.
func (u UUID) String() string {
	var b [36]byte
	return string(u.Append(b[:0]))
}

// Append appends the canonical form of u to dst.
func (u UUID) Append(dst []byte) []byte {
	var b [36]byte
	hex.Encode(b[0:8], u[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], u[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], u[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], u[8:10])
	b[23] = '-'
	hex.Encode(b[24:], u[10:])
	return append(dst, b[:]...)
}

// queue is a named set of partitions with options and consumer groups.
type queue struct {
	e       *Engine
	name    string
	id      uint64
	created int64
	opts    atomic.Pointer[QueueOptions]
	deleted atomic.Bool
	depth   atomic.Int64 // messages still to be done by the slowest group (see ready.go)
	flow    flow         // what went through it since start (flow.go)

	mu     sync.RWMutex
	byName nameIndex
	parts  []*partition // in sequence order; nil = forgotten (see partAt)
	seqs   []uint64     // parts[i]'s sequence number, kept for forgotten ones too
	holes  int          // nil entries in parts
	next   uint64       // the sequence number the next new partition gets
	gnames map[string]*group
	groups atomic.Pointer[[]*group] // copy on write; index = group.idx; nil = deleted

	dlqOp sync.Mutex // held by one redrive or purge at a time (outermost lock)
	dlqMu sync.Mutex
	dlq   []dlqItem

	tombMu   sync.Mutex
	tombs    map[*partition][]uint64 // deleted messages (tomb.go); nil until one is
	hasTombs atomic.Bool
}

func (q *queue) options() *QueueOptions { return q.opts.Load() }

func (q *queue) groupList() []*group {
	if p := q.groups.Load(); p != nil {
		return *p
	}
	return nil
}

// partition is an ordered lane of a queue. Everything in it is guarded by its
// stripe's lock.
type partition struct {
	q        *queue
	seq      uint64
	name     string
	next     uint64 // offset the next message gets
	durable  uint64 // offsets below this are committed: visible to pops
	lastTS   int64  // createdAt of the newest message (timestamps increase)
	chunks   []chunk
	memLo    int32       // chunks before this index have no messages in memory
	lost     int32       // chunks lost to journal damage (damage.go)
	pendFrom uint64      // where the pending messages start (ready.go)
	tm       *ptimer     // delayedProcessing and windowBuffer: wakes the groups; nil until needed
	groups   []pgState   // by group.idx
	dedup    *dedupIndex // producer transactionIds of the window (dedup.go); nil until one is seen
	keys     []keyRun    // which key sealed which offsets (keys.go); nil while nothing was sealed
	// gone: forgotten (retention, or created by a request that kept
	// nothing in it). Set under q.mu and the stripe; a push that holds a
	// gone partition looks its name up again.
	gone bool
}

func (p *partition) id() UUID { return partitionID(p.q.id, p.seq) }

// st is the stripe that guards p.
func (p *partition) st() *stripe { return p.q.e.stripeFor(p.q, p.seq) }

// chunk locates the messages of one push record in the journal: offsets
// [first, next chunk's first) at position pos, all created at ts. mem holds
// them in memory while they are cached.
type chunk struct {
	first uint64
	pos   uint64
	ts    int64
	mem   *cached
}

// cached is a chunk's messages in memory: the push record's buffer and, per
// message, where its fields are in it. The refs hold no pointers, so the
// garbage collector does not scan them.
type cached struct {
	buf   []byte
	refs  []msgRef
	cost  int64
	flags uint8  // record flags: payloads encrypted
	sub   string // the producer's authenticated subject, if any
	key   uint64 // the key that sealed the payloads (keys.go); 0: none named
}

type msgRef struct {
	id               UUID
	txn, trace, pay  uint32 // offsets into buf
	payLen           uint32
	txnLen, traceLen uint8
}

func (c *cached) msg(i int, ts int64) msg {
	r := &c.refs[i]
	return msg{
		id:      r.id,
		ts:      ts,
		flags:   c.flags,
		sub:     c.sub,
		key:     c.key,
		txn:     unsafeString(c.buf[r.txn : r.txn+uint32(r.txnLen)]),
		trace:   unsafeString(c.buf[r.trace : r.trace+uint32(r.traceLen)]),
		payload: c.buf[r.pay : r.pay+r.payLen : r.pay+r.payLen],
	}
}

// msg is a message as the engine hands it around. Strings and payload alias
// the push record's buffer.
type msg struct {
	id      UUID
	ts      int64
	txn     string // "" means the id
	trace   string
	payload []byte // as stored: sealed when flags has flagEncrypted
	flags   uint8
	sub     string
	key     uint64 // the key that sealed payload; 0: none named (not sealed, or sealed before keys were named)
}

// Push record flags.
const (
	flagEncrypted uint8 = 1 << iota // payloads are AES-256-GCM sealed: nonce | ciphertext | tag
	flagSub                         // a producer subject follows the flags
	flagKey                         // the id of the sealing key follows (keys.go)
)

// recordFlags are the flags that only say what follows in a record: memory
// keeps the fields instead.
const recordFlags = flagSub | flagKey

func (m *msg) txnID() string {
	if m.txn != "" {
		return m.txn
	}
	return m.id.String()
}

// pgState is a consumer group's state on one partition.
type pgState struct {
	cursor uint64    // first offset the group has not finished; noCursor until decided
	act    *pgActive // nil when idle
}

// noCursor marks a group that has not decided where it starts on a
// partition (its subscription applies when it first does).
const noCursor = ^uint64(0)

func (pg *pgState) init() bool { return pg.cursor != noCursor }

// saved is a (group, partition) state before an ack run or a transaction
// touched it: restore puts it back when the journal refuses their record.
type saved struct {
	pg       *pgState
	cursor   uint64
	hadAct   bool
	retries  []retryCount
	blocked  int64
	lease    *lease
	status   []uint8
	nDone    int
	released bool
}

func save(pg *pgState) *saved {
	s := &saved{pg: pg, cursor: pg.cursor}
	if a := pg.act; a != nil {
		s.hadAct = true
		s.retries = append([]retryCount(nil), a.retries...)
		s.blocked = a.blockedUntil
		if l := a.lease; l != nil {
			s.lease = l
			s.status = append([]uint8(nil), l.status...)
			s.nDone = l.nDone
			s.released = l.released
		}
	}
	return s
}

func (s *saved) restore() {
	pg := s.pg
	pg.cursor = s.cursor
	if a := pg.act; a != nil && s.hadAct {
		a.retries = s.retries
		if len(a.retries) == 0 {
			a.retries = nil
		}
		a.blockedUntil = s.blocked
		if l := s.lease; l != nil {
			copy(l.status, s.status)
			l.nDone = s.nDone
			l.released = s.released
		}
	}
}

// pgActive holds what only a busy (group, partition) needs.
type pgActive struct {
	lease        *lease
	retries      []retryCount // failed acks per offset (>= cursor), sorted
	blockedUntil int64        // a failed message waits out its retryDelay
	blockTimer   timer
	inReady      bool
	p            *partition
	g            *group
}

func (a *pgActive) idle() bool {
	return a.lease == nil && len(a.retries) == 0 && a.blockedUntil == 0 && !a.inReady
}

func (a *pgActive) retryCount(off uint64) uint32 {
	for _, rc := range a.retries {
		if rc.off == off {
			return rc.n
		}
	}
	return 0
}

func (a *pgActive) setRetries(off uint64, n uint32) {
	for i := range a.retries {
		if a.retries[i].off == off {
			a.retries[i].n = n
			return
		}
	}
	i := len(a.retries)
	for i > 0 && a.retries[i-1].off > off {
		i--
	}
	a.retries = append(a.retries, retryCount{})
	copy(a.retries[i+1:], a.retries[i:])
	a.retries[i] = retryCount{off: off, n: n}
}

// dropRetriesBelow forgets counts of messages the cursor has passed.
func (a *pgActive) dropRetriesBelow(cursor uint64) {
	k := 0
	for k < len(a.retries) && a.retries[k].off < cursor {
		k++
	}
	if k > 0 {
		a.retries = append(a.retries[:0], a.retries[k:]...)
		if len(a.retries) == 0 {
			a.retries = nil
		}
	}
}

// group is a consumer group's view of one queue.
type group struct {
	q       *queue
	name    string
	idx     int
	mode    SubMode
	from    int64 // SubNew: the group's creation stamp; SubFrom: the timestamp
	created int64

	mu      sync.Mutex
	ready   []*pgActive // partitions with deliverable messages (FIFO, lazily validated)
	rhead   int
	version uint64 // bumped whenever something becomes deliverable
	waiters []*waiter
	deleted atomic.Bool
}

// stripe guards a share of the partitions and owns a timer wheel.
type stripe struct {
	mu    sync.Mutex
	wheel wheel
	ended endedLeases
	_     [64]byte
}

// group returns the named group of q, or nil.
func (q *queue) group(name string) *group {
	q.mu.RLock()
	g := q.gnames[name]
	q.mu.RUnlock()
	return g
}

// pgFor returns g's state on p, deciding its cursor by the group's
// subscription the first time. Caller holds p's stripe.
func (e *Engine) pgFor(p *partition, g *group) *pgState {
	if g.idx >= len(p.groups) {
		n := len(p.q.groupList())
		if n <= g.idx {
			n = g.idx + 1
		}
		gs := make([]pgState, n)
		copy(gs, p.groups)
		for i := len(p.groups); i < n; i++ {
			gs[i].cursor = noCursor
		}
		p.groups = gs
	}
	pg := &p.groups[g.idx]
	if !pg.init() {
		pg.cursor = p.startFor(g)
	}
	return pg
}

// low is the oldest offset p still holds.
func (p *partition) low() uint64 {
	if len(p.chunks) > 0 {
		return p.chunks[0].first
	}
	return p.next
}

// startFor is where a group that has never read p starts: the oldest message
// (all), the first message stamped after the group appeared (new), or the
// first message stamped at or after the timestamp (from). Messages of one
// chunk share a stamp, so a binary search over chunks is exact.
func (p *partition) startFor(g *group) uint64 {
	switch g.mode {
	case SubNew:
		i := sort.Search(len(p.chunks), func(i int) bool { return p.chunks[i].ts > g.from })
		if i == len(p.chunks) {
			return p.next
		}
		return p.chunks[i].first
	case SubFrom:
		i := sort.Search(len(p.chunks), func(i int) bool { return p.chunks[i].ts >= g.from })
		if i == len(p.chunks) {
			return p.next
		}
		return p.chunks[i].first
	}
	return p.low()
}

// active returns the busy state of pg, allocating it if needed.
func (e *Engine) active(p *partition, g *group, pg *pgState) *pgActive {
	if pg.act == nil {
		pg.act = &pgActive{p: p, g: g}
	}
	return pg.act
}

// relax frees pg's busy state once it holds nothing.
func relax(pg *pgState) {
	if pg.act != nil && pg.act.idle() {
		pg.act = nil
	}
}

func (e *Engine) stripeFor(q *queue, seq uint64) *stripe {
	h := q.id*0x9e3779b97f4a7c15 + seq
	h ^= h >> 29
	return &e.stripes[h&e.smask]
}

// partition returns the named partition of q, or nil.
func (q *queue) partition(name string) *partition {
	q.mu.RLock()
	p := q.byName.get(name)
	q.mu.RUnlock()
	return p
}

// partitionOrCreate returns the named partition, creating it if needed; the
// caller journals its creation with the first push record.
func (e *Engine) partitionOrCreate(q *queue, name string) (p *partition, created bool, err error) {
	if p = q.partition(name); p != nil {
		return p, false, nil
	}
	if err := checkName("partition", name, false); err != nil {
		return nil, false, err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if p = q.byName.get(name); p != nil {
		return p, false, nil
	}
	if max := q.options().MaxPartitions; max > 0 && q.byName.len() >= max {
		return nil, false, fmt.Errorf("%w: queue %q has its maximum of %d partitions", ErrInvalid, q.name, max)
	}
	p = e.addPartition(q, e.newSeq(q, name), name)
	return p, true, nil
}

// addPartition creates partition seq of q; q.mu must be held. Sequence
// numbers are never reused, and q.parts is indexed by position, not by
// number, so a queue that created and forgot many partitions (or a corrupt
// record naming partition 2^40) costs nothing for the numbers in between.
func (e *Engine) addPartition(q *queue, seq uint64, name string) *partition {
	p := &partition{q: q, seq: seq, name: own(name)}
	n := len(q.parts)
	switch i := q.search(seq); {
	case i == n:
		q.parts, q.seqs = append(q.parts, p), append(q.seqs, seq)
	case q.seqs[i] == seq:
		if q.parts[i] == nil {
			q.holes--
		}
		q.parts[i] = p
	default:
		// Out of order (recovery: partitions created together may be
		// journaled in either order). New slices: callers may hold q.parts.
		parts, seqs := make([]*partition, 0, n+1), make([]uint64, 0, n+1)
		parts = append(append(append(parts, q.parts[:i]...), p), q.parts[i:]...)
		seqs = append(append(append(seqs, q.seqs[:i]...), seq), q.seqs[i:]...)
		q.parts, q.seqs = parts, seqs
	}
	if seq >= q.next {
		q.next = seq + 1
	}
	q.byName.put(p)
	return p
}

// search returns the position of the first entry numbered seq or higher.
func (q *queue) search(seq uint64) int {
	if n := len(q.seqs); n == 0 || q.seqs[n-1] < seq {
		return n // the common case: a new partition
	}
	return sort.Search(len(q.seqs), func(i int) bool { return q.seqs[i] >= seq })
}

// partAt finds partition seq of q (nil if there is none); q.mu must be held
// (or recovery running).
func (q *queue) partAt(seq uint64) *partition {
	if i := q.search(seq); i < len(q.seqs) && q.seqs[i] == seq {
		return q.parts[i]
	}
	return nil
}

// partitionByID finds a partition from its id.
func (e *Engine) partitionByID(id UUID) *partition {
	qid, seq, ok := splitPartitionID(id)
	if !ok {
		return nil
	}
	e.mu.RLock()
	q := e.queuesID[qid]
	e.mu.RUnlock()
	if q == nil || q.deleted.Load() {
		return nil
	}
	q.mu.RLock()
	defer q.mu.RUnlock()
	return q.partAt(seq)
}

// partitionID builds the stable id of partition number seq of the queue with
// the given 8-byte id: a UUIDv8 whose first half is the queue id and whose
// second half is the sequence number (62 bits).
func partitionID(queueID uint64, seq uint64) UUID {
	var u UUID
	binary.BigEndian.PutUint64(u[0:8], queueID)
	u[6] = 0x80 | u[6]&0x0f // version 8
	binary.BigEndian.PutUint64(u[8:16], seq)
	u[8] = 0x80 | u[8]&0x3f // variant
	return u
}

// queueSeq is the sequence number of a queue's own UUID (queueUUID): the
// highest a UUID's second half holds (62 bits: the rest carries the UUID
// variant), which no partition gets, so a queue's UUID is none of its
// partitions' ids (nor another queue's: the first half is the queue's).
const queueSeq = 1<<62 - 1

// maxPartitionSeq is the highest partition number a partition id holds.
const maxPartitionSeq = queueSeq - 1

// queueUUID is the UUID of the queue with the given 8-byte id, as doors show
// it (queueId): partitionID(queueID, queueSeq), xxxxxxxx-xxxx-8xxx-bfff-
// ffffffffffff. Derived from the id the journal and snapshots keep, it
// survives restarts; splitPartitionID refuses it, so it never names a
// partition.
func queueUUID(queueID uint64) UUID { return partitionID(queueID, queueSeq) }

// splitPartitionID is the inverse of partitionID: the queue id (with its
// version nibble) and the sequence number. A queue's UUID is not a
// partition's: ok is false.
func splitPartitionID(u UUID) (queueID uint64, seq uint64, ok bool) {
	if u[6]>>4 != 8 || u[8]>>6 != 2 {
		return 0, 0, false
	}
	queueID = binary.BigEndian.Uint64(u[0:8])
	seq = binary.BigEndian.Uint64(u[8:16]) & (1<<62 - 1)
	if seq > maxPartitionSeq {
		return 0, 0, false
	}
	return queueID, seq, true
}

// newQueueID returns a random queue id whose UUID form carries version 8.
func newQueueID() uint64 {
	for {
		id := rand.Uint64()
		id = id&^(0xf<<12) | 0x8<<12 // version nibble at byte 6's high half
		if id != 0 {
			return id
		}
	}
}
