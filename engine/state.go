package engine

import (
	"sync"
	"sync/atomic"
)

// queue is a named set of partitions with options and consumer groups.
type queue struct {
	name    string
	id      uint64
	created int64
	opts    atomic.Pointer[QueueOptions]
	deleted atomic.Bool

	mu     sync.RWMutex
	byName map[string]*partition
	parts  []*partition // by sequence number
	gnames map[string]*group
	groups atomic.Pointer[[]*group] // copy on write; index = group.idx; nil = deleted

	dlqMu sync.Mutex
	dlq   []DLQEntry
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
	q       *queue
	st      *stripe
	seq     uint64
	name    string
	next    uint64 // offset the next message gets
	durable uint64 // offsets below this are committed: visible to pops
	lastTS  int64  // createdAt of the newest message (timestamps increase)
	tail    *tail  // recent messages, nil when none are cached
	chunks  []chunk
	groups  []pgState         // by group.idx
	dedup   map[string]uint64 // producer transactionId -> offset; nil until one is seen
}

func (p *partition) id() UUID { return partitionID(p.q.id, p.seq) }

// chunk locates the messages of one push record in the journal: offsets
// [first, next chunk's first) at position pos, all created at ts.
type chunk struct {
	first uint64
	pos   uint64
	ts    int64
}

// msg is a cached message. Strings and payload alias the push record's
// buffer.
type msg struct {
	id      UUID
	ts      int64
	txn     string // "" means the id
	trace   string
	payload []byte
}

func (m *msg) txnID() string {
	if m.txn != "" {
		return m.txn
	}
	return m.id.String()
}

// tail caches a partition's recent messages: msgs[i] has offset base+i.
type tail struct {
	base  uint64
	msgs  []msg
	bytes int64
}

// pgState is a consumer group's state on one partition.
type pgState struct {
	cursor uint64    // first offset the group has not finished
	act    *pgActive // nil when idle
	init   bool      // cursor decided (subscription applied)
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

// ack states inside a lease.
const (
	stNone uint8 = iota
	stCompleted
	stFailed
	stRetry
	stDead
)

// lease is a consumer's claim on messages [from, to) of one partition for one
// group. A pop over several partitions gives them all the same id.
type lease struct {
	id       UUID
	p        *partition
	gidx     int
	from     uint64
	to       uint64
	expires  int64
	status   []uint8
	nDone    int
	ended    bool
	released bool // a failed or retry ack gave the rest of the lease back
	timer    timer
	set      *leaseSet
}

func (l *lease) statusAt(off uint64) uint8 { return l.status[off-l.from] }

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

func (g *group) pushReady(a *pgActive) {
	if g.rhead > 0 && g.rhead >= len(g.ready)/2 {
		n := copy(g.ready, g.ready[g.rhead:])
		clear(g.ready[n:])
		g.ready = g.ready[:n]
		g.rhead = 0
	}
	g.ready = append(g.ready, a)
}

func (g *group) popReady() *pgActive {
	if g.rhead >= len(g.ready) {
		return nil
	}
	a := g.ready[g.rhead]
	g.ready[g.rhead] = nil
	g.rhead++
	if g.rhead == len(g.ready) {
		g.ready = g.ready[:0]
		g.rhead = 0
	}
	return a
}

// stripe guards a share of the partitions and owns a timer wheel.
type stripe struct {
	mu    sync.Mutex
	wheel wheel
	ended endedLeases
	_     [64]byte
}

// endedLeases remembers recently ended leases so that an ack repeated after
// its lease ended answers as it did the first time (idempotent acks).
type endedLeases struct {
	m    map[endedKey]*lease
	ring []endedKey
	head int
}

type endedKey struct {
	id UUID
	p  *partition
}

const endedPerStripe = 1024

func (el *endedLeases) add(l *lease) {
	if el.m == nil {
		el.m = make(map[endedKey]*lease)
		el.ring = make([]endedKey, endedPerStripe)
	}
	k := endedKey{l.id, l.p}
	if old := el.ring[el.head]; old.p != nil {
		delete(el.m, old)
	}
	el.ring[el.head] = k
	el.head = (el.head + 1) % len(el.ring)
	el.m[k] = l
}

func (el *endedLeases) get(id UUID, p *partition) *lease {
	if el.m == nil {
		return nil
	}
	return el.m[endedKey{id, p}]
}
