package engine

import (
	"fmt"
	"sort"
)

// The tail cache keeps each partition's recent messages in memory; messages
// every group has finished are dropped from it at once, and under memory
// pressure (Config.CacheBytes) the older half of a busy partition's tail
// goes too. A message not in the cache is read back from the journal through
// the partition's chunk index.

// shrinkTail drops cached messages of p that every group of its queue has
// finished; with pressure it also drops the older half of what is left.
// Caller holds p's stripe.
func (e *Engine) shrinkTail(p *partition, pressure bool) {
	t := p.tail
	if t == nil {
		return
	}
	end := t.base + uint64(len(t.msgs))
	cut := t.base
	if groups := p.q.groupList(); len(groups) > 0 {
		min := end
		any := false
		for _, g := range groups {
			if g == nil {
				continue
			}
			any = true
			c := uint64(0)
			if g.idx < len(p.groups) && p.groups[g.idx].init {
				c = p.groups[g.idx].cursor
			}
			if c < min {
				min = c
			}
		}
		if any && min > cut {
			cut = min
		}
	}
	if pressure {
		if half := t.base + uint64(len(t.msgs))/2; half > cut {
			cut = half
		}
	}
	if cut <= t.base {
		return
	}
	e.dropTail(p, cut)
}

// dropTail removes cached messages below offset cut.
func (e *Engine) dropTail(p *partition, cut uint64) {
	t := p.tail
	end := t.base + uint64(len(t.msgs))
	if cut >= end {
		e.cacheBytes.Add(-t.bytes)
		p.tail = nil
		return
	}
	k := int(cut - t.base)
	var freed int64
	for i := 0; i < k; i++ {
		freed += msgCost(&t.msgs[i])
	}
	rest := t.msgs[k:]
	if cap(rest) > 2*len(rest)+64 {
		rest = append([]msg(nil), rest...) // let the old array go
	} else {
		clear(t.msgs[:k])
	}
	t.msgs = rest
	t.base = cut
	t.bytes -= freed
	e.cacheBytes.Add(-freed)
}

// chunkFor returns the index of the chunk holding offset off, or -1.
func (p *partition) chunkFor(off uint64) int {
	i := sort.Search(len(p.chunks), func(i int) bool { return p.chunks[i].first > off })
	return i - 1
}

// msgAt returns the message at offset off of p (from the cache or the
// journal). Caller holds p's stripe.
func (e *Engine) msgAt(p *partition, off uint64) (msg, error) {
	if t := p.tail; t != nil && off >= t.base && off < t.base+uint64(len(t.msgs)) {
		return t.msgs[off-t.base], nil
	}
	var one [1]msg
	got, err := e.readChunk(p, off, off+1, one[:0])
	if err != nil {
		return msg{}, err
	}
	if len(got) == 0 {
		return msg{}, fmt.Errorf("%w: offset %d of %s/%s", ErrMessageNotFound, off, p.q.name, p.name)
	}
	return got[0], nil
}

// msgsRange appends the messages [from, to) of p to dst. Caller holds p's
// stripe.
func (e *Engine) msgsRange(p *partition, from, to uint64, dst []msg) ([]msg, error) {
	for off := from; off < to; {
		if t := p.tail; t != nil && off >= t.base && off < t.base+uint64(len(t.msgs)) {
			hi := t.base + uint64(len(t.msgs))
			if hi > to {
				hi = to
			}
			dst = append(dst, t.msgs[off-t.base:hi-t.base]...)
			off = hi
			continue
		}
		hi := to
		if t := p.tail; t != nil && t.base > off && t.base < hi {
			hi = t.base
		}
		n := len(dst)
		var err error
		dst, err = e.readChunk(p, off, hi, dst)
		if err != nil {
			return dst, err
		}
		if len(dst) == n {
			return dst, fmt.Errorf("%w: offset %d of %s/%s", ErrMessageNotFound, off, p.q.name, p.name)
		}
		off += uint64(len(dst) - n)
	}
	return dst, nil
}

// readChunk appends messages from the journal record of the chunk that holds
// offset from, up to offset to (exclusive) or the chunk's end.
func (e *Engine) readChunk(p *partition, from, to uint64, dst []msg) ([]msg, error) {
	ci := p.chunkFor(from)
	if ci < 0 {
		return dst, nil
	}
	c := p.chunks[ci]
	rec, err := e.j.Read(c.pos)
	if err != nil {
		return dst, fmt.Errorf("reading %s/%s offset %d from the journal: %w", p.q.name, p.name, from, err)
	}
	pr, ok := findPush(rec, p.q.id, p.seq, c.first)
	if !ok {
		return dst, fmt.Errorf("%w: journal position %d holds no messages of %s/%s from offset %d", errCorruptRecord, c.pos, p.q.name, p.name, c.first)
	}
	for i := range pr.msgs {
		off := c.first + uint64(i)
		if off >= from && off < to {
			dst = append(dst, pr.msgs[i])
		}
	}
	return dst, nil
}

// findPush finds the push record of (queueID, seq) starting at first in rec,
// which is a push record or a transaction holding it.
func findPush(rec []byte, queueID, seq, first uint64) (pushRecord, bool) {
	r := reader{b: rec}
	switch r.u8() {
	case recPush:
		pr := readPush(&r, nil)
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
