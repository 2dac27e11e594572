package engine

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"time"
)

// A snapshot is the whole state (without leases and without cached
// payloads, which stay in the journal) at one journal position; recovery
// loads it and replays only what follows.
//
//	snapshot   = version u8 (1, or 2 with Config.JournalLeases) | stamp varint | nq uvarint | nq × queue | [keys (keys.go)]
//	             | [streams (streams.go)]
//	queue      = id u64 | name str | created varint | options | ngroups uvarint | ngroups × group
//	             | nparts uvarint | nparts × partition | ndead uvarint | ndead × dead
//	group      = idx uvarint | name str | mode u8 | from varint | created varint   (slots = max idx+1)
//	partition  = seq uvarint | name str | next uvarint | lastTS varint
//	             | nchunks uvarint | nchunks × (first uvarint | pos uvarint | ts varint)   (pos 0: lost, damage.go)
//	             | ndedup uvarint | ndedup × (fingerprint u64 | offset uvarint)
//	             | nstates uvarint | nstates × (gidx uvarint | cursor uvarint | blockedUntil varint
//	                                           | nretries uvarint | nretries × (offset uvarint | n uvarint)
//	                                           | [lease, in version 2: as in an effect record])
//	             | ntombs uvarint | ntombs × offset uvarint
//	dead       = seq uvarint | group str | (as in an effect record's dead entry)
const (
	snapshotVersion       = 1
	snapshotVersionLeases = 2 // group states carry their lease (Config.JournalLeases)
)

// Snapshot writes the engine's state to the journal's snapshot store and
// drops journal segments that nothing needs any more. It briefly stops every
// change (all locks are held while the state is encoded).
func (e *Engine) Snapshot() error {
	if err := e.check(); err != nil {
		return err
	}
	return e.snapshot()
}

// snapshotRatio is how many times its size is journaled, at least, between
// one automatic snapshot and the next (Config.SnapshotEveryBytes).
const snapshotRatio = 8

// maybeSnapshot starts a snapshot in the background once enough was
// journaled since the last one.
func (e *Engine) maybeSnapshot() {
	if e.cfg.SnapshotEveryBytes <= 0 || e.sinceSnap.Load() < max(e.cfg.SnapshotEveryBytes, snapshotRatio*e.snapBytes.Load()) ||
		!e.snapping.CompareAndSwap(false, true) {
		return
	}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		defer e.snapping.Store(false)
		if err := e.Snapshot(); err != nil && !errors.Is(err, ErrClosed) {
			e.log.Error("automatic snapshot failed", "err", err)
		}
	}()
}

func (e *Engine) snapshot() error {
	e.snapMu.Lock()
	defer e.snapMu.Unlock()
	data, pos, minLive := e.encodeSnapshot()
	e.sinceSnap.Store(0)
	e.snapBytes.Store(int64(len(data)))
	// Everything up to pos must be durable before the snapshot claims it.
	// A journal that is behind refuses the barrier for a while: wait for it
	// (no lock is held here; a stuck journal is Close's bound to handle).
	ch := make(chan error, 1)
	for wait := time.Millisecond; ; wait = min(2*wait, 100*time.Millisecond) {
		_, err := e.append([]byte{recBarrier}, func(err error) { ch <- err })
		if err == nil {
			break
		}
		if !errors.Is(err, ErrOverloaded) {
			return err
		}
		time.Sleep(wait)
	}
	if err := <-ch; err != nil {
		return fmt.Errorf("%w: %w", ErrJournal, err)
	}
	if err := e.j.WriteSnapshot(pos, data); err != nil {
		return fmt.Errorf("engine: writing snapshot: %w", err)
	}
	prev := e.snapPos
	e.snapPos = pos
	// Keep what the previous snapshot needs too (the journal falls back to
	// it if the newest is damaged), and every record holding live messages:
	// the journal picks what goes.
	if err := e.j.Release(prev, minLive); err != nil {
		return fmt.Errorf("engine: dropping old journal segments: %w", err)
	}
	// A few live messages must not pin an old segment: copy them forward,
	// so a later snapshot can drop it (a journal that is behind stops it:
	// the next snapshot goes on).
	if _, err := e.relocateOldest(pos); err != nil && !errors.Is(err, ErrOverloaded) {
		return err
	}
	return nil
}

// lockAll stops every change: the engine lock, every queue, every stripe.
func (e *Engine) lockAll() (unlock func()) {
	e.mu.Lock()
	qs := make([]*queue, 0, len(e.queues))
	for _, q := range e.queues {
		qs = append(qs, q)
	}
	sort.Slice(qs, func(i, j int) bool { return qs[i].id < qs[j].id })
	for _, q := range qs {
		q.mu.Lock()
	}
	for i := range e.stripes {
		e.stripes[i].mu.Lock()
	}
	return func() {
		for i := range e.stripes {
			e.stripes[i].mu.Unlock()
		}
		for _, q := range qs {
			q.mu.Unlock()
		}
		e.mu.Unlock()
	}
}

// encodeSnapshot returns the state, the journal position it covers and the
// oldest position that still holds a retained message (0 if none).
func (e *Engine) encodeSnapshot() ([]byte, uint64, uint64) {
	unlock := e.lockAll()
	defer unlock()
	pos := e.lastPos.Load()
	var minLive uint64
	b := make([]byte, 0, 1<<16)
	leases := e.cfg.JournalLeases
	if leases {
		b = append(b, snapshotVersionLeases)
	} else {
		b = append(b, snapshotVersion)
	}
	b = appendVarint(b, e.stamp.Load())
	b = appendUvarint(b, uint64(len(e.queues)))
	for _, q := range e.queues {
		b = appendU64(b, q.id)
		b = appendStr(b, q.name)
		b = appendVarint(b, q.created)
		b = appendOptions(b, q.options())
		groups := q.groupList()
		live := 0
		for _, g := range groups {
			if g != nil {
				live++
			}
		}
		b = appendUvarint(b, uint64(live))
		for _, g := range groups {
			if g == nil {
				continue
			}
			b = appendUvarint(b, uint64(g.idx))
			b = appendStr(b, g.name)
			b = append(b, byte(g.mode))
			b = appendVarint(b, g.from)
			b = appendVarint(b, g.created)
		}
		n := 0
		for _, p := range q.parts {
			if p != nil {
				n++
			}
		}
		b = appendUvarint(b, uint64(n))
		for _, p := range q.parts {
			if p == nil {
				continue
			}
			for _, c := range p.chunks { // moved chunks are not in position order
				if c.pos == lostPos {
					continue
				}
				if minLive == 0 || c.pos < minLive {
					minLive = c.pos
				}
			}
			b = appendPartition(b, p, groups, leases)
		}
		q.dlqMu.Lock()
		b = appendUvarint(b, uint64(len(q.dlq)))
		for i := range q.dlq {
			d := &q.dlq[i]
			b = appendUvarint(b, d.p.seq)
			b = appendStr(b, d.group)
			b = appendDead(b, &d.deadEntry)
		}
		q.dlqMu.Unlock()
	}
	b = e.appendKeySection(b)
	b = e.appendStreamsSection(b)
	return b, pos, minLive
}

func appendPartition(b []byte, p *partition, groups []*group, leases bool) []byte {
	b = appendUvarint(b, p.seq)
	b = appendStr(b, p.name)
	b = appendUvarint(b, p.next)
	b = appendVarint(b, p.lastTS)
	b = appendUvarint(b, uint64(len(p.chunks)))
	for _, c := range p.chunks {
		b = appendUvarint(b, c.first)
		b = appendUvarint(b, c.pos)
		b = appendVarint(b, c.ts)
	}
	if d := p.dedup; d != nil {
		b = appendUvarint(b, uint64(d.n))
		for i, fp := range d.fps {
			if fp != 0 {
				b = appendU64(b, fp)
				b = appendUvarint(b, d.base+uint64(d.offs[i]))
			}
		}
	} else {
		b = appendUvarint(b, 0)
	}
	n := 0
	for i := range p.groups {
		if p.groups[i].init() && i < len(groups) && groups[i] != nil {
			n++
		}
	}
	b = appendUvarint(b, uint64(n))
	for i := range p.groups {
		pg := &p.groups[i]
		if !pg.init() || i >= len(groups) || groups[i] == nil {
			continue
		}
		b = appendUvarint(b, uint64(i))
		b = appendUvarint(b, pg.cursor)
		var retries []retryCount
		var blocked int64
		if pg.act != nil {
			retries, blocked = pg.act.retries, pg.act.blockedUntil
		}
		b = appendVarint(b, blocked)
		b = appendUvarint(b, uint64(len(retries)))
		for _, rc := range retries {
			b = appendUvarint(b, rc.off)
			b = appendUvarint(b, uint64(rc.n))
		}
		if leases {
			b = appendLeaseRec(b, leaseRecOf(pg))
		}
	}
	tombs := p.q.tombsOf(p)
	b = appendUvarint(b, uint64(len(tombs)))
	for _, t := range tombs {
		b = appendUvarint(b, t)
	}
	return b
}

// loadSnapshot rebuilds the state from a snapshot (recovery only).
func (e *Engine) loadSnapshot(data []byte) error {
	r := reader{b: data}
	v := r.u8()
	if v != snapshotVersion && v != snapshotVersionLeases {
		return fmt.Errorf("%w: snapshot version %d", errCorruptRecord, v)
	}
	e.observeStamp(r.varint())
	nq := r.count(16)
	for i := 0; i < nq && r.err == nil; i++ {
		id := r.u64()
		name := r.str()
		created := r.varint()
		o := readOptions(&r)
		q := e.newQueue(name, id, created, &o)
		ng := r.count(4)
		for k := 0; k < ng && r.err == nil; k++ {
			idx := int(r.uvarint())
			g := &group{q: q, name: r.str(), mode: SubMode(r.u8()), from: r.varint(), created: r.varint()}
			if idx > 1<<20 {
				r.fail()
				break
			}
			gs := q.groupList()
			for len(gs) <= idx {
				gs = append(gs, nil)
			}
			gs = append([]*group(nil), gs...)
			g.idx = idx
			gs[idx] = g
			q.groups.Store(&gs)
			q.gnames[g.name] = g
		}
		np := r.count(4)
		for k := 0; k < np && r.err == nil; k++ {
			e.readPartition(&r, q, v == snapshotVersionLeases)
		}
		nd := r.count(8)
		for k := 0; k < nd && r.err == nil; k++ {
			seq := r.uvarint()
			gname := r.str()
			d := readDead(&r)
			if r.err != nil {
				break
			}
			g := q.gnames[gname]
			if g == nil {
				g = &group{q: q, name: gname}
			}
			if p := q.partAt(seq); p != nil {
				e.refileDead(p, g, []deadEntry{d})
			}
		}
		if r.err == nil {
			e.queues[name] = q
			e.queuesID[id] = q
		}
	}
	if r.err == nil && len(r.b) > 0 {
		e.readKeySection(&r)
	}
	if r.err == nil && len(r.b) > 0 {
		e.readStreamsSection(&r) // snapshots written before streams end before it
	}
	return r.err
}

func (e *Engine) readPartition(r *reader, q *queue, leases bool) {
	seq := r.uvarint()
	name := r.str()
	// A snapshot lists a queue's partitions in ascending order.
	if n := len(q.seqs); r.err != nil || seq > maxPartitionSeq || (n > 0 && q.seqs[n-1] >= seq) {
		r.fail()
		return
	}
	p := e.addPartition(q, seq, name)
	p.next = r.uvarint()
	p.durable = p.next
	p.lastTS = r.varint()
	nc := r.count(3)
	if nc > 0 {
		p.chunks = make([]chunk, 0, nc)
	}
	for i := 0; i < nc && r.err == nil; i++ {
		p.chunks = append(p.chunks, chunk{first: r.uvarint(), pos: r.uvarint(), ts: r.varint()})
		if p.chunks[i].pos == lostPos {
			p.lost++ // lost to journal damage (damage.go)
		}
	}
	if nd := r.count(9); nd > 0 {
		// Offsets are stored relative to the table's base: base it at the
		// lowest (a partition may be past offset 2^32).
		type entry struct{ fp, off uint64 }
		es := make([]entry, 0, nd)
		low := uint64(math.MaxUint64)
		for i := 0; i < nd && r.err == nil; i++ {
			e := entry{fp: r.u64(), off: r.uvarint()}
			es = append(es, e)
			low = min(low, e.off)
		}
		p.dedup = &dedupIndex{}
		for _, e := range es {
			if e.off-low < 1<<32 { // a window wider than that cannot be held (never written)
				p.dedup.put(e.fp, e.off, low)
			}
		}
	}
	ns := r.count(3)
	groups := q.groupList()
	for i := 0; i < ns && r.err == nil; i++ {
		gidx := int(r.uvarint())
		cursor := r.uvarint()
		blocked := r.varint()
		nr := r.count(2)
		var retries []retryCount
		for k := 0; k < nr && r.err == nil; k++ {
			off := r.uvarint()
			retries = append(retries, retryCount{off: off, n: uint32(r.uvarint())})
		}
		var lr *leaseRec
		if leases {
			lr = readLeaseRec(r)
		}
		if r.err != nil || gidx >= len(groups) || groups[gidx] == nil {
			r.fail()
			return
		}
		g := groups[gidx]
		pg := e.pgFor(p, g)
		pg.cursor = cursor
		if len(retries) > 0 || blocked != 0 {
			a := e.active(p, g, pg)
			a.retries, a.blockedUntil = retries, blocked
		}
		if lr != nil {
			p.st().mu.Lock()
			e.restoreLease(p, g, pg, lr)
			p.st().mu.Unlock()
		}
	}
	nt := r.count(1)
	for i := 0; i < nt && r.err == nil; i++ {
		q.addTomb(p, r.uvarint())
	}
}
