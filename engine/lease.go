package engine

import (
	"fmt"
	"strings"
	"sync"
	"time"
	"unsafe"
)

// A lease is a consumer's claim on a run of one partition's messages for one
// group: pop makes it, acks mark its messages (the cursor passes the finished
// ones: advanceCursor), and it ends when every message is acked or a failed
// or retry ack gives the rest back (settle, endLease), when it expires
// (fire), when a seek moves the cursor (endLease), or when its group goes or
// the queue is deleted (retireLease).
// An ended lease is remembered a while (endedLeases) so that a repeated ack
// answers as it did the first time. ExtendLease moves the expiry of every
// partition lease of one pop, which the registry finds by id.

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
	// names holds how acks may name each message (from + i), taken from
	// the messages the pop delivered, so that an ack by id or
	// transactionId does not read the lease's records back from the
	// journal when they have left the cache. Kept only for a pop whose
	// acks name messages (PopRequest.AcksByName) and while the names of
	// every live lease fit Config.CacheBytes (Engine.nameBytes; a consumer
	// that pops and never acks must not grow the process); nil otherwise,
	// and once the lease has ended: findInLease then reads the messages.
	names     []leaseName
	nameBytes int64 // what names holds, counted in Engine.nameBytes
}

// leaseName is how an ack may name one message of a lease besides its
// offset: its id, and its transactionId, kept as 16 bytes when it is a
// UUID's canonical text (as Queen's clients make them) and as an owned
// string otherwise.
type leaseName struct {
	id    UUID
	txnID UUID   // the transactionId, when txnOf == txnUUID
	txn   string // the transactionId, when txnOf == txnText
	txnOf uint8
}

// What a message's transactionId is, in a leaseName.
const (
	txnNone uint8 = iota // none: the message is named by its id's text
	txnUUID              // a UUID's canonical text, kept in txnID
	txnText              // anything else, kept in txn
)

// keepNames gives l the names of ms, its messages in order, when they fit
// what is left of the budget. Caller holds l's partition's stripe.
func (e *Engine) keepNames(l *lease, ms []msg) {
	names := leaseNames(ms)
	cost := int64(len(names)) * int64(unsafe.Sizeof(leaseName{}))
	for i := range names {
		cost += int64(len(names[i].txn))
	}
	if e.nameBytes.Add(cost) > e.cfg.CacheBytes {
		e.nameBytes.Add(-cost) // the rare case: the names are dropped
		return
	}
	l.names, l.nameBytes = names, cost
}

// dropNames gives l's names back to the budget.
func (e *Engine) dropNames(l *lease) {
	if l.names != nil {
		e.nameBytes.Add(-l.nameBytes)
		l.names, l.nameBytes = nil, 0
	}
}

// leaseNames makes the names of ms, which the lease holds in order.
func leaseNames(ms []msg) []leaseName {
	names := make([]leaseName, len(ms))
	for i := range ms {
		n := &names[i]
		n.id = ms[i].id
		txn := ms[i].txn
		if txn == "" {
			continue
		}
		var ok bool
		if n.txnID, ok = canonicalUUID(txn); ok {
			n.txnOf = txnUUID
		} else {
			n.txnOf, n.txn = txnText, strings.Clone(txn) // txn aliases the record
		}
	}
	return names
}

// named reports whether n is the message an ack names: by id when byID,
// else by the transactionId text txn, where id is txn parsed and idText
// says txn is id's canonical text.
func (n *leaseName) named(byID bool, id UUID, idText bool, txn string) bool {
	switch {
	case byID:
		return n.id == id
	case n.txnOf == txnText:
		return n.txn == txn
	case n.txnOf == txnUUID:
		return idText && n.txnID == id
	default:
		return idText && n.id == id
	}
}

func (l *lease) statusAt(off uint64) uint8 { return l.status[off-l.from] }

// Ack states kept per message inside a lease: the status asked for, plus a
// flag when the message ended in the dead-letter queue (a dlq ack, or a
// failed ack with no retries left).
const stDeadFlag uint8 = 8

func wantStatus(s AckStatus) uint8 {
	switch s {
	case Completed:
		return stCompleted
	case FailedAck:
		return stFailed
	case Retry:
		return stRetry
	case DLQ:
		return stDead
	}
	return stNone
}

// finished reports whether the cursor may pass a message with this state.
func finished(st uint8) bool { return st == stCompleted || st&stDeadFlag != 0 }

// advanceCursor moves pg's cursor past the finished messages of l at its
// front (completed or dead-lettered): the cursor rule, for acks and for a pop
// whose lease starts with deleted messages. Caller holds the stripe.
func advanceCursor(pg *pgState, l *lease) {
	for pg.cursor < l.to && finished(l.statusAt(pg.cursor)) {
		pg.cursor++
	}
}

func statusName(s uint8) string {
	switch s &^ stDeadFlag {
	case stCompleted:
		return "completed"
	case stFailed:
		return "failed"
	case stRetry:
		return "retry"
	case stDead:
		return "dlq"
	}
	return "none"
}

// fire expires a lease: its messages not passed by the cursor come back, in
// order, at once.
func (l *lease) fire(f *wheelFire) {
	if l.ended {
		return
	}
	e := f.e
	p := l.p
	g := p.q.groupList()[l.gidx]
	pg := &p.groups[l.gidx]
	var wakes []*waiter
	e.endLease(p, pg, l, &wakes)
	if g != nil {
		e.notify(p, g, pg, &wakes)
	}
	if len(wakes) > 0 {
		f.after = append(f.after, func() { e.wake(wakes) })
	}
}

// endLease ends a lease (all acked, released, or expired). Caller holds p's
// stripe and notifies the group afterwards.
func (e *Engine) endLease(p *partition, pg *pgState, l *lease, wakes *[]*waiter) {
	e.retireLease(l)
	if pg.act != nil && pg.act.lease == l {
		pg.act.lease = nil
	}
}

// retireLease marks l ended and remembers it for repeated acks. Caller holds
// l's partition's stripe.
func (e *Engine) retireLease(l *lease) {
	if l.ended {
		return
	}
	l.ended = true
	// The names go with the lease's life: the group's state keeps its last
	// lease, and an idle partition must not keep a name per message.
	e.dropNames(l)
	l.p.st().wheel.cancel(&l.timer)
	l.p.st().ended.add(l)
	e.leases.ended(l)
}

// ExtendLease pushes the expiry of every partition lease of a pop to at least
// now+d, while they are live. It returns the new expiry. With
// Config.JournalLeases it waits until the new expiries are durable.
func (e *Engine) ExtendLease(id UUID, d time.Duration) (time.Time, error) {
	type answer struct {
		at  time.Time
		err error
	}
	ch := make(chan answer, 1)
	e.ExtendLeaseAsync(id, d, func(at time.Time, err error) { ch <- answer{at, err} })
	a := <-ch
	return a.at, a.err
}

// ExtendLeaseAsync is ExtendLease answering through done: at once, or, with
// Config.JournalLeases, once the records stating the new expiries are
// durable (so the next leader of a replicated shard keeps them). A lease
// whose record the journal refuses keeps its old expiry, and the call fails.
func (e *Engine) ExtendLeaseAsync(id UUID, d time.Duration, done func(time.Time, error)) {
	if err := e.check(); err != nil {
		done(time.Time{}, err)
		return
	}
	if d <= 0 {
		done(time.Time{}, fmt.Errorf("%w: extension must be positive", ErrInvalid))
		return
	}
	ls := e.leases.get(id)
	if len(ls) == 0 {
		done(time.Time{}, fmt.Errorf("%w: lease %s not found", ErrLeaseInvalid, id))
		return
	}
	var pend *pending
	if e.cfg.JournalLeases {
		pend = newPending(nil)
	}
	var exp int64
	var refused error
	live := 0
	for _, l := range ls {
		st := l.p.st()
		st.mu.Lock()
		if !l.ended {
			at := e.clock.Now() + int64(d)
			if at > l.expires {
				old := l.expires
				l.expires = at
				if pend != nil {
					if gs := l.p.q.groupList(); l.gidx < len(gs) && gs[l.gidx] != nil {
						if _, err := e.appendHeld(e.effectRecord(l.p, gs[l.gidx], &l.p.groups[l.gidx], nil), pend); err != nil {
							l.expires = old
							refused = err
						}
					}
				}
				if l.expires == at {
					st.wheel.schedule(&l.timer, at, l)
				}
			}
			if l.expires > exp {
				exp = l.expires
			}
			live++
		}
		st.mu.Unlock()
	}
	if live == 0 {
		done(time.Time{}, fmt.Errorf("%w: lease %s already ended", ErrLeaseInvalid, id))
		return
	}
	answer := func(err error) {
		if err == nil {
			err = refused
		}
		if err != nil {
			done(time.Time{}, err)
			return
		}
		done(time.Unix(0, exp), nil)
	}
	if pend == nil {
		answer(nil)
		return
	}
	pend.fn = answer
	pend.finish()
}

// endedLeases remembers recently ended leases (a bounded ring per stripe)
// so that an ack repeated after its lease ended answers as it did the first
// time (idempotent acks). Only what that needs is kept.
type endedLeases struct {
	m    map[endedKey]endedLease
	ring []endedKey
	head int
}

type endedKey struct {
	id UUID
	p  *partition
}

type endedLease struct {
	from   uint64
	status []uint8
}

const endedPerStripe = 512

func (el *endedLeases) add(l *lease) {
	if el.m == nil {
		el.m = make(map[endedKey]endedLease)
		el.ring = make([]endedKey, endedPerStripe)
	}
	k := endedKey{l.id, l.p}
	if old := el.ring[el.head]; old.p != nil {
		delete(el.m, old)
	}
	el.ring[el.head] = k
	el.head = (el.head + 1) % len(el.ring)
	el.m[k] = endedLease{from: l.from, status: l.status}
}

// get returns a read-only view of an ended lease, or nil.
func (el *endedLeases) get(id UUID, p *partition) *lease {
	en, ok := el.m[endedKey{id, p}]
	if !ok {
		return nil
	}
	return &lease{id: id, p: p, from: en.from, to: en.from + uint64(len(en.status)), status: en.status, ended: true}
}

// leaseSet is the leases one pop handed out (one per partition), sharing one
// id; ExtendLease finds them through the registry.
type leaseSet struct {
	id     UUID
	leases []*lease
	live   int // guarded by the registry shard's lock
}

// leaseRegistry maps live lease ids to their sets, sharded to keep pops on
// different cores from contending.
type leaseRegistry struct {
	shards [32]leaseShard
}

type leaseShard struct {
	mu sync.Mutex
	m  map[UUID]*leaseSet
	_  [40]byte
}

func (r *leaseRegistry) shard(id UUID) *leaseShard {
	return &r.shards[id[15]&31]
}

func (r *leaseRegistry) add(s *leaseSet) {
	sh := r.shard(s.id)
	sh.mu.Lock()
	if sh.m == nil {
		sh.m = make(map[UUID]*leaseSet)
	}
	s.live = len(s.leases)
	sh.m[s.id] = s
	sh.mu.Unlock()
}

// ended notes that one lease of its set ended; the set leaves the registry
// with its last lease.
func (r *leaseRegistry) ended(l *lease) {
	s := l.set
	if s == nil {
		return
	}
	sh := r.shard(s.id)
	sh.mu.Lock()
	s.live--
	if s.live <= 0 {
		delete(sh.m, s.id)
	}
	sh.mu.Unlock()
}

// restore adds l, replayed, to the set of its id (a pop over several
// partitions gave them one id).
func (r *leaseRegistry) restore(l *lease) {
	sh := r.shard(l.id)
	sh.mu.Lock()
	if sh.m == nil {
		sh.m = make(map[UUID]*leaseSet)
	}
	s := sh.m[l.id]
	if s == nil {
		s = &leaseSet{id: l.id}
		sh.m[l.id] = s
	}
	s.leases = append(s.leases, l)
	s.live++
	l.set = s
	sh.mu.Unlock()
}

func (r *leaseRegistry) get(id UUID) []*lease {
	sh := r.shard(id)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	s := sh.m[id]
	if s == nil {
		return nil
	}
	return append([]*lease(nil), s.leases...)
}

// Leases in records (Config.JournalLeases): an effect record, and each group
// state of a snapshot, states the group's lease of the partition after the
// change, so that replay (on the next leader of a replicated shard) knows
// every live lease.

// leaseRecOf states pg's live lease; nil when it has none.
func leaseRecOf(pg *pgState) *leaseRec {
	if pg.act == nil || pg.act.lease == nil || pg.act.lease.ended {
		return nil
	}
	l := pg.act.lease
	return &leaseRec{id: l.id, from: l.from, expires: l.expires, released: l.released, status: l.status}
}

func appendLeaseRec(b []byte, l *leaseRec) []byte {
	if l == nil {
		return append(b, 0)
	}
	b = append(b, 1)
	b = append(b, l.id[:]...)
	b = appendUvarint(b, l.from)
	b = appendVarint(b, l.expires)
	b = appendBool(b, l.released)
	return appendBytes(b, l.status)
}

func readLeaseRec(r *reader) *leaseRec {
	if r.u8() != 1 {
		return nil
	}
	l := &leaseRec{id: r.uuid(), from: r.uvarint(), expires: r.varint(), released: r.bool()}
	l.status = append([]uint8(nil), r.bytesRef()...)
	if r.err != nil || l.from+uint64(len(l.status)) < l.from {
		r.fail()
		return nil
	}
	return l
}

// restoreLease makes pg's lease the one rec states (nil: none), on replay:
// its timer is armed for the expiry it had (late by the time the replay took
// to come, never early), and a lease that rec states finished or released
// ends, remembered for repeated acks. Caller holds p's stripe.
func (e *Engine) restoreLease(p *partition, g *group, pg *pgState, rec *leaseRec) {
	var wakes []*waiter // nothing waits during a replay
	var l *lease
	if pg.act != nil {
		l = pg.act.lease
	}
	if l != nil && (rec == nil || l.id != rec.id || l.from != rec.from || int(l.to-l.from) != len(rec.status)) {
		e.endLease(p, pg, l, &wakes)
		l = nil
	}
	if rec == nil {
		relax(pg)
		return
	}
	if l == nil {
		l = &lease{id: rec.id, p: p, gidx: g.idx, from: rec.from, to: rec.from + uint64(len(rec.status)), status: make([]uint8, len(rec.status))}
		e.active(p, g, pg).lease = l
		e.leases.restore(l)
	}
	copy(l.status, rec.status)
	l.nDone = 0
	for _, st := range l.status {
		if finished(st) {
			l.nDone++
		}
	}
	l.released = rec.released
	if l.ended {
		return
	}
	if rec.expires != l.expires || !l.timer.scheduled() {
		l.expires = rec.expires
		p.st().wheel.schedule(&l.timer, l.expires, l)
	}
	if l.released || l.nDone == len(l.status) {
		e.endLease(p, pg, l, &wakes)
	}
}
