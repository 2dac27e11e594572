package engine

import (
	"fmt"
	"sort"
)

// The tail cache keeps each partition's recent messages in memory, one
// *cached per push record (chunk). Chunks every group has finished leave
// memory at once; under memory pressure (Config.CacheBytes) the older half of
// a busy partition's cached chunks goes too. A message not in memory is read
// back from the journal through the chunk index.

// chunkEnd is the offset after chunk i's last message.
func (p *partition) chunkEnd(i int) uint64 {
	if i+1 < len(p.chunks) {
		return p.chunks[i+1].first
	}
	return p.next
}

// minCursor is the lowest cursor of the queue's groups on p (0 when a group
// has not decided where it starts, p.next when there are no groups: nothing
// is finished for a group that does not exist yet, but a new group may start
// anywhere, so with no groups nothing is dropped for being finished).
func (p *partition) minCursor() (uint64, bool) {
	min := p.next
	any := false
	for _, g := range p.q.groupList() {
		if g == nil {
			continue
		}
		any = true
		c := uint64(0)
		if g.idx < len(p.groups) && p.groups[g.idx].init() {
			c = p.groups[g.idx].cursor
		}
		if c < min {
			min = c
		}
	}
	return min, any
}

// shrinkTail drops cached chunks of p that every group has finished; with
// pressure it also drops the older half of what is left. Caller holds p's
// stripe.
func (e *Engine) shrinkTail(p *partition, pressure bool) {
	i := int(p.memLo)
	if min, any := p.minCursor(); any {
		for i < len(p.chunks) && p.chunkEnd(i) <= min {
			e.dropChunk(&p.chunks[i])
			i++
		}
	}
	if pressure {
		// memLo may lag behind a run of chunks out of memory (see
		// coolDown): halve what is in memory, not the run.
		for i < len(p.chunks) && p.chunks[i].mem == nil {
			i++
		}
		stop := i + (len(p.chunks)-i+1)/2
		for ; i < stop; i++ {
			e.dropChunk(&p.chunks[i])
		}
	}
	p.memLo = int32(i)
	e.refreshDepth(p)
}

func (e *Engine) dropChunk(c *chunk) {
	if c.mem != nil {
		e.cacheBytes.Add(-c.mem.cost)
		c.mem = nil
	}
}

// dropAllChunks releases every cached chunk of p (queue deleted).
func (e *Engine) dropAllChunks(p *partition) {
	for i := int(p.memLo); i < len(p.chunks); i++ {
		e.dropChunk(&p.chunks[i])
	}
	p.memLo = int32(len(p.chunks))
}

// chunkFor returns the index of the chunk holding offset off, or -1.
func (p *partition) chunkFor(off uint64) int {
	i := sort.Search(len(p.chunks), func(i int) bool { return p.chunks[i].first > off })
	return i - 1
}

// msgAt returns the message at offset off of p (from memory or the journal).
// Caller holds p's stripe.
func (e *Engine) msgAt(p *partition, off uint64) (msg, error) {
	var one [1]msg
	got, err := e.msgsRange(p, off, off+1, one[:0])
	if err != nil {
		return msg{}, err
	}
	return got[0], nil
}

// msgsRange appends the messages [from, to) of p to dst. Caller holds p's
// stripe.
func (e *Engine) msgsRange(p *partition, from, to uint64, dst []msg) ([]msg, error) {
	if from >= to {
		return dst, nil
	}
	ci := p.chunkFor(from)
	if ci < 0 || to > p.next {
		return dst, fmt.Errorf("%w: offsets %d-%d of %s/%s", ErrMessageNotFound, from, to, p.q.name, p.name)
	}
	for off := from; off < to; ci++ {
		c := &p.chunks[ci]
		end := min(p.chunkEnd(ci), to)
		if c.mem != nil {
			for ; off < end; off++ {
				dst = append(dst, c.mem.msg(int(off-c.first), c.ts))
			}
			continue
		}
		if c.pos == lostPos {
			return dst, fmt.Errorf("%w: offsets %d-%d of %s/%s were lost to journal damage (see the start's log)",
				ErrMessageNotFound, c.first, p.chunkEnd(ci)-1, p.q.name, p.name)
		}
		pr, err := e.readChunk(p, c)
		if err != nil {
			return dst, err
		}
		mem := cached{buf: pr.buf, refs: pr.refs, flags: pr.flags &^ recordFlags, sub: pr.sub, key: pr.key}
		for ; off < end; off++ {
			i := int(off - c.first)
			if i >= len(mem.refs) {
				return dst, fmt.Errorf("%w: journal position %d holds too few messages of %s/%s", errCorruptRecord, c.pos, p.q.name, p.name)
			}
			dst = append(dst, mem.msg(i, c.ts))
		}
	}
	return dst, nil
}

// readChunk reads the push record of chunk c back from the journal. A
// failure (the journal's entry went bad since the start) is counted in
// Stats.ReadErrors and wraps ErrUnreadable.
func (e *Engine) readChunk(p *partition, c *chunk) (pushRecord, error) {
	rec, err := e.j.Read(c.pos)
	if err != nil {
		e.stats.readErrors.Add(1)
		return pushRecord{}, fmt.Errorf("%w: reading %s/%s offset %d from the journal: %w", ErrUnreadable, p.q.name, p.name, c.first, err)
	}
	pr, ok := findPush(rec, p.q.id, p.seq, c.first)
	if !ok {
		e.stats.readErrors.Add(1)
		return pushRecord{}, fmt.Errorf("%w: %w: journal position %d holds no messages of %s/%s from offset %d", ErrUnreadable, errCorruptRecord, c.pos, p.q.name, p.name, c.first)
	}
	return pr, nil
}

// findPush finds the push record of (queueID, seq) starting at first in rec,
// which is a push record or a transaction holding it.
func findPush(rec []byte, queueID, seq, first uint64) (pushRecord, bool) {
	r := reader{b: rec}
	switch r.u8() {
	case recPush, recMove:
		pr := readPush(&r, rec)
		if r.err == nil && pr.queueID == queueID && pr.seq == seq && pr.first == first {
			return pr, true
		}
	case recTxn:
		n := r.count(1)
		for i := 0; i < n && r.err == nil; i++ {
			sub := r.bytesRef()
			if pr, ok := findPush(sub, queueID, seq, first); ok {
				return pr, true
			}
		}
	}
	return pushRecord{}, false
}

// coldChunk is a push record to read back into memory.
type coldChunk struct {
	first, pos uint64
}

// coldChunks lists the records holding offsets [from, from+n) of p that
// are not in memory. Caller holds p's stripe.
func (e *Engine) coldChunks(p *partition, from, n uint64) []coldChunk {
	to := min(from+n, p.durable)
	var cold []coldChunk
	for ci := p.chunkFor(from); ci >= 0 && ci < len(p.chunks) && p.chunks[ci].first < to; ci++ {
		if c := &p.chunks[ci]; c.mem == nil && c.pos != lostPos {
			cold = append(cold, coldChunk{c.first, c.pos})
		}
	}
	return cold
}

// warm reads records back from the journal, without p's stripe held, and
// puts them back in memory where their chunks are still the same. It stops
// once it read budget bytes (a pop's byte budget: what a pop cannot answer
// is not worth reading now).
func (e *Engine) warm(p *partition, cold []coldChunk, budget int) {
	type got struct {
		coldChunk
		pr pushRecord
	}
	var read []got
	for _, cc := range cold {
		if budget <= 0 {
			break
		}
		rec, err := e.j.Read(cc.pos)
		if err != nil {
			break // the pop will read (and report) it under the lock
		}
		budget -= len(rec)
		if pr, ok := findPush(rec, p.q.id, p.seq, cc.first); ok {
			read = append(read, got{cc, pr})
		}
	}
	st := p.st()
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, g := range read {
		// A chunk moved meanwhile (compaction) holds the same messages at
		// its new position.
		ci := p.chunkFor(g.first)
		if ci < 0 || p.chunks[ci].first != g.first || p.chunks[ci].pos == lostPos || p.chunks[ci].mem != nil {
			continue
		}
		e.cacheChunk(p, ci, g.pr)
	}
}

// coolDown drops from memory the chunks that a pop read back (cold), when
// the cache is over its budget. Caller holds p's stripe.
func (e *Engine) coolDown(p *partition, cold []coldChunk) {
	if e.cacheBytes.Load() <= e.cfg.CacheBytes {
		return
	}
	end := 0
	for _, cc := range cold {
		if ci := p.chunkFor(cc.first); ci >= 0 && p.chunks[ci].first == cc.first {
			e.dropChunk(&p.chunks[ci])
			end = max(end, ci+1)
		}
	}
	// memLo moves past the chunks just dropped, no further: past them a
	// backlog's chunks are all out of memory up to the tail, and looking
	// for the first one in memory cost each pop of a lagging group a walk
	// over the whole backlog (a twentieth of a cold consume's CPU). A push
	// over the budget still makes that walk once after such a pop (see
	// shrinkTail), and a pop with no push following makes none.
	i := int(p.memLo)
	for i < end && p.chunks[i].mem == nil {
		i++
	}
	p.memLo = int32(i)
}

// cacheChunk puts chunk ci of p back in memory from its record, read back.
// Caller holds p's stripe.
func (e *Engine) cacheChunk(p *partition, ci int, pr pushRecord) {
	mem := &cached{buf: pr.buf, refs: pr.refs, cost: int64(cap(pr.buf) + 48*len(pr.refs) + 64),
		flags: pr.flags &^ recordFlags, sub: pr.sub, key: pr.key}
	p.chunks[ci].mem = mem
	e.cacheBytes.Add(mem.cost)
	if int32(ci) < p.memLo {
		p.memLo = int32(ci)
	}
}
