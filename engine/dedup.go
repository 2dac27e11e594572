package engine

import (
	"sort"
	"time"
)

// Duplicate detection by transactionId, per partition, for the queue's
// DedupWindow (default 1 hour): a push whose transactionId was pushed to the
// same partition within the window answers Duplicate with the first message's
// id. The index keeps, per remembered id, a 64-bit fingerprint of the
// transactionId and the message's offset (as 32 bits from a base): 12 bytes a
// slot in an open-addressing table between 3/8 and 3/4 full, so 16 to 32
// bytes an id (BenchmarkDedupMemory measures it). A fingerprint match is confirmed
// against the stored message, so a collision never refuses a message.
// Entries older than the window are skipped and dropped when the table
// grows.

// DefaultDedupWindow is how long transactionIds are remembered.
const DefaultDedupWindow = time.Hour

type dedupIndex struct {
	fps  []uint64 // 0 = empty slot
	offs []uint32 // offset - base
	base uint64
	n    int
}

// fingerprint is FNV-1a 64 of s (stable across restarts: snapshots keep
// fingerprints), never 0.
func fingerprint(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	if h == 0 {
		h = 1
	}
	return h
}

// get returns the offset remembered for fingerprint fp, if any.
func (x *dedupIndex) get(fp uint64) (uint64, bool) {
	if x == nil || x.n == 0 {
		return 0, false
	}
	mask := uint64(len(x.fps) - 1)
	for i := fp & mask; ; i = (i + 1) & mask {
		switch x.fps[i] {
		case 0:
			return 0, false
		case fp:
			return x.base + uint64(x.offs[i]), true
		}
	}
}

// put remembers fp at offset off (replacing an older entry with the same
// fingerprint), dropping entries below floor when the table must grow.
func (x *dedupIndex) put(fp, off, floor uint64) {
	if x.fps == nil {
		x.fps, x.offs, x.base = make([]uint64, 16), make([]uint32, 16), floor
	}
	if off-x.base >= 1<<32 || (x.n+1)*4 > len(x.fps)*3 {
		x.rebuild(floor, off)
	}
	mask := uint64(len(x.fps) - 1)
	for i := fp & mask; ; i = (i + 1) & mask {
		switch x.fps[i] {
		case 0:
			x.fps[i], x.offs[i] = fp, uint32(off-x.base)
			x.n++
			return
		case fp:
			x.offs[i] = uint32(off - x.base)
			return
		}
	}
}

// rebuild copies the live entries (at or above floor) into a table sized
// for them, based at floor.
func (x *dedupIndex) rebuild(floor, newest uint64) {
	oldF, oldO, oldBase := x.fps, x.offs, x.base
	live := 0
	for i, fp := range oldF {
		if fp != 0 && oldBase+uint64(oldO[i]) >= floor {
			live++
		}
	}
	size := 16
	for size < 2*(live+1) { // at most half full after a rebuild
		size <<= 1
	}
	if floor > newest {
		floor = newest
	}
	x.fps, x.offs, x.base, x.n = make([]uint64, size), make([]uint32, size), floor, 0
	mask := uint64(size - 1)
	for i, fp := range oldF {
		off := oldBase + uint64(oldO[i])
		if fp == 0 || off < floor {
			continue
		}
		j := fp & mask
		for x.fps[j] != 0 {
			j = (j + 1) & mask
		}
		x.fps[j], x.offs[j] = fp, uint32(off-floor)
		x.n++
	}
}

// dedupFloor is the first offset of p still inside the queue's window.
// Caller holds p's stripe.
func (e *Engine) dedupFloor(p *partition) uint64 {
	w := p.q.options().DedupWindow
	if w <= 0 {
		w = DefaultDedupWindow
	}
	cut := e.clock.Now() - int64(w)
	i := sort.Search(len(p.chunks), func(i int) bool { return p.chunks[i].ts >= cut })
	if i == len(p.chunks) {
		return p.next
	}
	return p.chunks[i].first
}

// findTxn returns the offset of the message of p whose transactionId is txn,
// pushed within the window. Caller holds p's stripe.
func (e *Engine) findTxn(p *partition, txn string, floor uint64) (uint64, bool) {
	off, ok := p.dedup.get(fingerprint(txn))
	if !ok || off < floor || off < p.low() || off >= p.next {
		return 0, false
	}
	m, err := e.msgAt(p, off)
	if err != nil || m.txn != txn {
		return 0, false // a fingerprint collision (or a message gone): not a duplicate
	}
	return off, true
}

// rememberTxn records txn at offset off. Caller holds p's stripe.
func (e *Engine) rememberTxn(p *partition, txn string, off, floor uint64) {
	if p.dedup == nil {
		p.dedup = &dedupIndex{}
	}
	p.dedup.put(fingerprint(txn), off, floor)
}
