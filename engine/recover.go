package engine

import (
	"fmt"
	"time"
)

// recover rebuilds the state from the journal: the newest snapshot, then
// every record after it. Leases are not recovered (their messages come back);
// retry counts, cursors, dead-letter entries and messages are. A journal
// that lost records to damage and was opened to salvage them is rebuilt
// from what is left (see damage.go).
func (e *Engine) recover() error {
	start := time.Now()
	sv, _ := e.j.(Salvager)
	if sv != nil && sv.Salvaged() {
		e.sv = &salvageState{placeholders: map[uint64]bool{}, deletedIDs: map[uint64]bool{}}
		defer func() { e.sv = nil }()
	}
	spos, data, ok, err := e.j.LoadSnapshot()
	if err != nil {
		return fmt.Errorf("engine: loading snapshot: %w", err)
	}
	if ok {
		if err := e.loadSnapshot(data); err != nil {
			return fmt.Errorf("engine: snapshot at position %d: %w", spos, err)
		}
		e.lastPos.Store(spos)
		e.snapPos = spos
	} else if err := e.checkJournalStart(sv); err != nil {
		return err
	}
	loaded := time.Since(start)
	n := 0
	err = e.j.Replay(spos, func(pos uint64, rec []byte) error {
		n++
		e.lastPos.Store(pos)
		// Push records stay referenced by the tail cache: keep a copy.
		if err := e.applyRecord(pos, append([]byte(nil), rec...)); err != nil {
			if e.sv != nil {
				e.sv.badRecords++
				e.log.Error("recovery SALVAGE: skipping a record that does not decode", "position", pos, "err", err)
				return nil
			}
			return fmt.Errorf("record at position %d: %w", pos, err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("engine: replaying the journal: %w", err)
	}
	if sv != nil {
		if err := e.checkChunks(sv); err != nil {
			return err
		}
	}
	e.afterRecovery()
	if ok || n > 0 {
		e.log.Info("engine recovered", "snapshot", ok, "records", n, "queues", len(e.queues), "took", time.Since(start).Round(time.Millisecond),
			"snapshot_took", loaded.Round(time.Millisecond))
	}
	if s := e.sv; s != nil {
		lost := e.reportLost()
		if lost > 0 || s.badRecords > 0 || len(s.queues)+len(s.groups) > 0 || (!ok && n > 0) {
			// What was rebuilt becomes the newest snapshot: the next start
			// does not depend on the salvage again.
			e.sv = nil
			if err := e.snapshot(); err != nil {
				e.log.Error("recovery SALVAGE: the snapshot of the rebuilt state failed; the next start rebuilds it again", "err", err)
			}
		}
	}
	return nil
}

// applyRecord applies one journaled record to the state (recovery only: no
// locks are contended, but they are taken where helpers expect them).
func (e *Engine) applyRecord(pos uint64, rec []byte) error {
	r := reader{b: rec}
	switch kind := r.u8(); kind {
	case recQueue:
		id := r.u64()
		name := r.str()
		created := r.varint()
		o := readOptions(&r)
		if r.err != nil {
			return r.err
		}
		e.observeStamp(created)
		if q := e.queuesID[id]; q != nil {
			e.renameSalvaged(q, name, created)
			q.setOptions(&o)
			return nil
		}
		q := e.newQueue(name, id, created, &o)
		if old := e.queues[name]; old != nil {
			delete(e.queuesID, old.id)
		}
		e.queues[name] = q
		e.queuesID[id] = q
	case recQueueDel:
		id := r.u64()
		if r.err != nil {
			return r.err
		}
		if q := e.queuesID[id]; q != nil {
			e.dropQueue(q)
		}
		if e.sv != nil {
			e.sv.deletedIDs[id] = true
		}
	case recPush:
		pr := readPush(&r, rec)
		if r.err != nil {
			return r.err
		}
		return e.replayPush(pos, &pr)
	case recEffect:
		ef := readEffect(&r)
		if r.err != nil {
			return r.err
		}
		e.replayEffect(&ef)
	case recGroup:
		qid := r.u64()
		name := r.str()
		mode := SubMode(r.u8())
		from := r.varint()
		created := r.varint()
		if r.err != nil {
			return r.err
		}
		e.observeStamp(created)
		q := e.queuesID[qid]
		if q == nil || q.gnames[name] != nil {
			return nil
		}
		q.mu.Lock()
		e.addGroup(q, &group{q: q, name: name, mode: mode, from: from, created: created})
		q.mu.Unlock()
	case recGroupDel:
		qid := r.u64()
		name := r.str()
		if r.err != nil {
			return r.err
		}
		if q := e.queuesID[qid]; q != nil {
			q.mu.Lock()
			g := q.gnames[name]
			if g != nil {
				e.removeGroup(q, g)
			}
			parts := q.parts
			q.mu.Unlock()
			if g != nil {
				e.clearGroupState(g, parts)
			}
		}
	case recTxn:
		n := r.count(1)
		for i := 0; i < n && r.err == nil; i++ {
			if err := e.applyRecord(pos, r.bytesRef()); err != nil {
				return err
			}
		}
		return r.err
	case recMove:
		pr := readPush(&r, rec)
		if r.err != nil {
			return r.err
		}
		e.replayMove(pos, &pr)
	case recRetain:
		qid := r.u64()
		seq := r.uvarint()
		low := r.uvarint()
		if r.err != nil {
			return r.err
		}
		if p := e.replayPart(qid, seq); p != nil {
			p.st().mu.Lock()
			e.growTo(p, low)
			e.applyLow(p, low)
			p.st().mu.Unlock()
		}
	case recDLQDel:
		qid := r.u64()
		n := r.count(16)
		ids := make([]UUID, 0, n)
		for i := 0; i < n && r.err == nil; i++ {
			ids = append(ids, r.uuid())
		}
		if r.err != nil {
			return r.err
		}
		if q := e.queuesID[qid]; q != nil {
			q.dlqMu.Lock()
			q.dropDead(ids)
			q.dlqMu.Unlock()
		}
	case recForget:
		qid := r.u64()
		seq := r.uvarint()
		if r.err != nil {
			return r.err
		}
		if p := e.replayPart(qid, seq); p != nil {
			e.forget(p)
		}
	case recTomb:
		qid := r.u64()
		seq := r.uvarint()
		off := r.uvarint()
		if r.err != nil {
			return r.err
		}
		if p := e.replayPart(qid, seq); p != nil {
			p.st().mu.Lock()
			e.growTo(p, off+1)
			p.st().mu.Unlock()
			p.q.addTomb(p, off)
		}
	case recKeys:
		return e.replayKeys(&r)
	case recStreamQuery, recStreamState:
		return e.replayStream(kind, &r)
	case recBarrier:
	default:
		return fmt.Errorf("%w: unknown record kind %d", errCorruptRecord, kind)
	}
	return nil
}

// maxCreationReorder bounds how far out of order the creation of a partition
// may reach the journal: as many creations as can run at once.
const maxCreationReorder = 4096

func (e *Engine) replayPush(pos uint64, pr *pushRecord) error {
	q := e.queuesID[pr.queueID]
	if q == nil {
		// Its queue was deleted (and the deletion is behind a snapshot), or
		// (salvaging) its creation was lost.
		if q = e.salvagedQueue(pr.queueID); q == nil {
			return nil
		}
	}
	q.mu.Lock()
	p := q.partAt(pr.seq)
	if p == nil {
		// A partition created after the snapshot. Partitions created at the
		// same time may be journaled out of order, but never far apart:
		// anything else is a damaged record (and inserting far back would
		// cost a copy of the table per record).
		if pr.seq > maxPartitionSeq {
			q.mu.Unlock()
			return fmt.Errorf("%w: %s: partition number %d is beyond what an id holds", errCorruptRecord, q.name, pr.seq)
		}
		if i := q.search(pr.seq); len(q.seqs)-i > maxCreationReorder {
			q.mu.Unlock()
			return fmt.Errorf("%w: %s: partition %d is created %d places back", errCorruptRecord, q.name, pr.seq, len(q.seqs)-i)
		}
		p = e.addPartition(q, pr.seq, pr.part)
	}
	q.mu.Unlock()
	e.observeStamp(pr.ts)
	p.st().mu.Lock()
	defer p.st().mu.Unlock()
	if len(pr.refs) == 0 && pr.ts > p.lastTS {
		p.lastTS = pr.ts // an empty partition's creation
	}
	switch {
	case pr.first < p.next:
		return nil // already in the snapshot
	case pr.first > p.next && e.sv != nil:
		e.extendLost(p, pr.first, pr.ts) // the pushes in between were lost
	case pr.first > p.next:
		return fmt.Errorf("%w: %s/%s jumps from offset %d to %d", errCorruptRecord, q.name, p.name, p.next, pr.first)
	}
	e.applyPushMem(p, pos, pr.first, pr.ts, pr.buf, pr.refs, pr.flags, pr.sub, pr.key, true)
	return nil
}

// replayPart finds partition seq of queue qid during recovery (nil if
// either is gone).
func (e *Engine) replayPart(qid, seq uint64) *partition {
	if q := e.queuesID[qid]; q != nil {
		return q.partAt(seq)
	}
	return nil
}

// replayMove points a chunk at its copy (the original segment may be gone).
// A copy of messages that a salvage found lost (their push records were in
// entries dropped or damaged) brings them back: damage.go's recoverLost.
func (e *Engine) replayMove(pos uint64, pr *pushRecord) {
	p := e.replayPart(pr.queueID, pr.seq)
	if p == nil {
		return
	}
	p.st().mu.Lock()
	defer p.st().mu.Unlock()
	i := p.chunkFor(pr.first)
	switch {
	case i < 0:
	case p.chunks[i].pos == lostPos:
		e.recoverLost(p, i, pos, pr)
	case p.chunks[i].first == pr.first:
		p.chunks[i].pos = pos
	}
}

func (e *Engine) replayEffect(ef *effect) {
	q := e.queuesID[ef.queueID]
	if q == nil {
		if e.sv != nil {
			e.sv.orphanRecs++
		}
		return
	}
	q.mu.RLock()
	p := q.partAt(ef.seq)
	g := q.gnames[ef.group]
	q.mu.RUnlock()
	if g == nil && p != nil {
		g = e.salvagedGroup(q, ef.group)
	}
	if p == nil || g == nil {
		if e.sv != nil {
			e.sv.orphanRecs++
		}
		e.log.Warn("recovery: effect for an unknown partition or group skipped", "queue", q.name, "group", ef.group)
		return
	}
	p.st().mu.Lock()
	defer p.st().mu.Unlock()
	e.growTo(p, ef.cursor)
	pg := e.pgFor(p, g)
	pg.cursor = ef.cursor
	if len(ef.retries) > 0 || ef.blockedUntil != 0 {
		a := e.active(p, g, pg)
		a.retries = ef.retries
		a.blockedUntil = ef.blockedUntil
	} else if pg.act != nil {
		pg.act.retries = nil
		pg.act.blockedUntil = 0
		relax(pg)
	}
	if ef.withLease {
		e.restoreLease(p, g, pg, ef.lease)
	}
	e.refileDead(p, g, ef.dead)
}

// afterRecovery arms retry delays, builds the ready lists and trims caches.
func (e *Engine) afterRecovery() {
	now := e.clock.Now()
	for _, q := range e.queues {
		for _, p := range q.parts {
			if p == nil {
				continue
			}
			p.st().mu.Lock()
			p.durable = p.next
			for _, g := range q.groupList() {
				if g == nil {
					continue
				}
				pg := e.pgFor(p, g)
				if a := pg.act; a != nil && a.blockedUntil != 0 {
					if a.blockedUntil <= now {
						a.blockedUntil = 0
					} else {
						p.st().wheel.schedule(&a.blockTimer, a.blockedUntil, a)
					}
				}
				e.notify(p, g, pg, new([]*waiter))
			}
			p.pendFrom = p.next // counts from nothing; shrinkTail adds what is pending
			e.shrinkTail(p, false)
			p.st().mu.Unlock()
		}
	}
}

// dropQueue forgets q and everything in it. e.mu is held (or recovery).
func (e *Engine) dropQueue(q *queue) {
	q.deleted.Store(true)
	delete(e.queues, q.name)
	delete(e.queuesID, q.id)
	q.mu.RLock()
	parts := q.parts
	q.mu.RUnlock()
	for _, p := range parts {
		if p == nil {
			continue
		}
		p.st().mu.Lock()
		for i := range p.groups {
			if a := p.groups[i].act; a != nil {
				if a.lease != nil {
					e.retireLease(a.lease)
				}
				p.st().wheel.cancel(&a.blockTimer)
			}
		}
		p.groups = nil
		e.dropAllChunks(p)
		p.st().mu.Unlock()
	}
}
