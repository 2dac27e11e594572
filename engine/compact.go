package engine

import (
	"fmt"
	"sort"
)

// Compaction: a journal segment can be dropped once no retained message
// lives in it. When only a few do (most of the segment is acks, or messages
// of deleted queues), they are copied forward as move records, so that the
// segment goes at the next snapshot instead of being pinned for ever.

// RelocateMaxChunks is the most push records copied forward out of one old
// segment; a segment with more live records is left (copying most of it
// would only move it).
const RelocateMaxChunks = 256

type liveChunk struct {
	p     *partition
	first uint64
	pos   uint64
}

// relocateOldest copies forward the live chunks of the oldest journal
// segment (Journal.OldestSegment) when it lies wholly before position limit
// and there are few enough. It returns how many chunks moved.
func (e *Engine) relocateOldest(limit uint64) (int, error) {
	lo, hi, ok := e.j.OldestSegment()
	if !ok || hi > limit {
		return 0, nil
	}
	var live []liveChunk
	e.mu.RLock()
	qs := make([]*queue, 0, len(e.queues))
	for _, q := range e.queues {
		qs = append(qs, q)
	}
	e.mu.RUnlock()
	for _, q := range qs {
		q.mu.RLock()
		parts := append([]*partition(nil), q.parts...)
		q.mu.RUnlock()
		for _, p := range parts {
			if p == nil {
				continue
			}
			p.st().mu.Lock()
			for _, c := range p.chunks {
				if c.pos >= lo && c.pos < hi {
					live = append(live, liveChunk{p, c.first, c.pos})
				}
			}
			p.st().mu.Unlock()
			if len(live) > RelocateMaxChunks {
				return 0, nil
			}
		}
	}
	sort.Slice(live, func(i, j int) bool { return live[i].pos < live[j].pos })
	moved := 0
	for _, lc := range live {
		ok, err := e.moveChunk(lc)
		if err != nil {
			return moved, err
		}
		if ok {
			moved++
		}
	}
	if moved > 0 {
		e.log.Info("journal compaction: copied live messages forward", "records", moved, "from_position", lo)
	}
	return moved, nil
}

// moveChunk copies one push record forward and points its chunk at the copy
// once the copy is durable: a read of the chunk before that (it is not in
// memory) would find nothing at the new position. Until then the chunk
// keeps pointing at the original, which its segment keeps: a snapshot
// meanwhile records the old position (and keeps that segment, minLive).
func (e *Engine) moveChunk(lc liveChunk) (bool, error) {
	p := lc.p
	st := p.st()
	st.mu.Lock()
	defer st.mu.Unlock()
	if p.q.deleted.Load() {
		return false, nil
	}
	i := p.chunkFor(lc.first)
	if i < 0 || p.chunks[i].first != lc.first || p.chunks[i].pos != lc.pos {
		return false, nil // gone or moved meanwhile
	}
	c := &p.chunks[i]
	ms, err := e.msgsRange(p, c.first, p.chunkEnd(i), nil)
	if err != nil {
		return false, fmt.Errorf("engine: compaction: %w", err)
	}
	if len(ms) == 0 {
		return false, nil
	}
	first, old := c.first, c.pos
	var pos uint64
	// done takes the stripe, which is held here until pos is set.
	pos, err = e.append(encodePush(recMove, p, c.first, c.ts, ms[0].flags, ms[0].sub, ms), func(err error) {
		if err != nil {
			return // the original stays
		}
		st.mu.Lock()
		defer st.mu.Unlock()
		if i := p.chunkFor(first); i >= 0 && p.chunks[i].first == first && p.chunks[i].pos == old {
			p.chunks[i].pos = pos
		}
	})
	if err != nil {
		return false, err
	}
	return true, nil
}
