package log

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"

	"github.com/tidwall/wal"
)

// cacheSlots is how many decoded entries Read keeps, so that reading the
// records of one entry decodes it once: an entry holds the records of many
// partitions, and consumers of those partitions come for them at different
// times (with 4 slots, a consume of 16 cold partitions spent a tenth of the
// broker's CPU decompressing the same entries again; with 32, entries of
// about 300 messages were still decoded 1.4 times each, the slots full long
// before the bytes). Config.ReadCacheBytes bounds the decompression
// buffers the slots keep.
const cacheSlots = 128

// entryCache holds the last few decoded entries (guarded by Log.readMu).
type entryCache struct {
	budget  int // Config.ReadCacheBytes
	tick    uint64
	decodes uint64 // entries decoded (for tests)
	frames  frameIndex
	slots   [cacheSlots]struct {
		valid bool
		used  uint64
		d     decoded
	}
}

func (c *entryCache) get(index uint64) *decoded {
	for i := range c.slots {
		s := &c.slots[i]
		if s.valid && s.d.index == index {
			c.tick++
			s.used = c.tick
			return &s.d
		}
	}
	return nil
}

// fill decodes data into a slot: an empty one while the budget has room
// for the entry, otherwise the least recently used one whose buffer holds
// it (or the least recently used one), whose buffer the entry reuses. Once
// the budget is full, reading more entries allocates nothing: before, a
// slot the budget had emptied was filled with a fresh buffer and another
// slot emptied in its place, so that with entries of 1 MiB messages a
// fifth of a consume's CPU went to allocating and zeroing decompression
// buffers.
//
// data is not kept: an uncompressed entry's body is copied into the slot's
// buffer. data may be the buffer of the next read (readOld), and when it
// comes from tidwall/wal it is part of a whole segment's buffer, which a
// slot would keep alive and count at the segment's size (the slots then
// held one entry each and read it again for every reader).
func (c *entryCache) fill(index uint64, data []byte, maxRaw int) (*decoded, error) {
	need := 0
	if len(data) >= entryHeaderLen {
		need = min(int(binary.LittleEndian.Uint32(data[entryRawLenOff:])), maxRaw)
	}
	held, lru, lruFit, empty := 0, -1, -1, -1
	for i := range c.slots {
		s := &c.slots[i]
		held += s.d.held()
		switch {
		case !s.valid:
			if empty < 0 || s.d.held() > c.slots[empty].d.held() {
				empty = i // a free slot, the one with the largest buffer
			}
			continue
		case lru < 0 || s.used < c.slots[lru].used:
			lru = i
		}
		if cap(s.d.buf) >= need && (lruFit < 0 || s.used < c.slots[lruFit].used) {
			lruFit = i // the least recently used one whose buffer fits
		}
	}
	var v int
	switch {
	case empty >= 0 && (lru < 0 || held+need <= c.budget || cap(c.slots[empty].d.buf) >= need):
		v = empty
	case lruFit >= 0:
		v = lruFit
	default:
		v = lru
	}
	s := &c.slots[v]
	s.valid = false
	c.decodes++
	if err := decodeEntry(&s.d, data, index, maxRaw); err != nil {
		return nil, err
	}
	if data[entryCodecOff] != codecZstd { // its body is in data
		if cap(s.d.buf) < len(s.d.body) {
			s.d.buf = make([]byte, 0, len(s.d.body))
		}
		s.d.body = append(s.d.buf[:0], s.d.body...)
	}
	c.tick++
	s.valid, s.used = true, c.tick
	c.trim(v)
	return &s.d, nil
}

// trim drops the least recently used other slots, buffers and all, while
// the slots' buffers together hold more than the budget.
func (c *entryCache) trim(keep int) {
	for {
		total, lru := 0, -1
		for i := range c.slots {
			s := &c.slots[i]
			held := s.d.held()
			total += held
			if i != keep && held > 0 && (lru < 0 || s.used < c.slots[lru].used) {
				lru = i
			}
		}
		if total <= c.budget || lru < 0 {
			return
		}
		c.slots[lru].valid = false
		c.slots[lru].d = decoded{}
	}
}

// reset empties the cache and closes the segment files it keeps open.
func (c *entryCache) reset() {
	c.frames.closeFiles()
	*c = entryCache{budget: c.budget}
}

// readRaw returns the stored bytes of the entry at index. They are immutable
// (tidwall/wal is opened with NoCopy and entries are never rewritten) and may
// be used after the locks are released. The caller holds wmu.RLock and
// readMu.
func (l *Log) readRaw(index uint64) (data []byte, err error) {
	// tidwall/wal indexes its segment arrays without bounds checks: an old
	// segment whose framing was damaged on disk can make Read panic.
	defer func() {
		if v := recover(); v != nil {
			data, err = nil, fmt.Errorf("%w: entry %d: segment framing is broken (%v)", ErrCorrupt, index, v)
		}
	}()
	data, err = l.wal.Read(index)
	switch {
	case err == nil:
		return data, nil
	case errors.Is(err, wal.ErrNotFound):
		return nil, fmt.Errorf("%w: entry %d", ErrNotFound, index)
	case errors.Is(err, wal.ErrCorrupt):
		return nil, fmt.Errorf("%w: entry %d: segment framing is broken", ErrCorrupt, index)
	}
	if errors.Is(err, fs.ErrNotExist) { // its segment file went away
		return nil, fmt.Errorf("%w: entry %d: %w", ErrCorrupt, index, err)
	}
	return nil, fmt.Errorf("log: read entry %d: %w", index, err)
}

// Read returns a copy of the record at pos. A record whose entry fails its
// checks is never returned: the error wraps ErrCorrupt and names the entry.
// A position not (or no longer) in the log gives ErrNotFound.
func (l *Log) Read(pos uint64) ([]byte, error) {
	index, rec := PosIndex(pos), PosRecord(pos)
	l.wmu.RLock()
	defer l.wmu.RUnlock()
	if l.wal == nil {
		return nil, ErrClosed
	}
	if index == 0 || index < l.first.Load() || index > l.last.Load() {
		return nil, fmt.Errorf("%w: position %d (entry %d; the log holds entries %d..%d)",
			ErrNotFound, pos, index, l.first.Load(), l.last.Load())
	}
	if l.isHole(index) {
		return nil, fmt.Errorf("%w: %w: position %d: entry %d (a salvage left a hole in its place)", ErrCorrupt, ErrLost, pos, index)
	}
	l.readMu.Lock()
	defer l.readMu.Unlock()
	d := l.cache.get(index)
	if d == nil {
		data, ok := l.readOld(index)
		if !ok {
			var err error
			if data, err = l.readRaw(index); err != nil {
				return nil, err
			}
		}
		var err error
		d, err = l.cache.fill(index, data, l.cfg.MaxEntryBytes)
		l.cache.frames.release()
		if err != nil {
			return nil, err
		}
	}
	if rec >= len(d.spans) {
		return nil, fmt.Errorf("%w: position %d: entry %d holds %d records", ErrNotFound, pos, index, len(d.spans))
	}
	return bytes.Clone(d.record(rec)), nil
}

// readEntry fetches the stored bytes of one entry for Replay.
func (l *Log) readEntry(index uint64) ([]byte, error) {
	l.wmu.RLock()
	defer l.wmu.RUnlock()
	if l.wal == nil {
		return nil, ErrClosed
	}
	l.readMu.Lock()
	defer l.readMu.Unlock()
	return l.readRaw(index)
}

// Replay calls fn for every record with a position above after, in order,
// up to the last entry written when Replay was called; after=0 replays from
// the start. rec is valid only during the call. Replay stops at and returns
// the first error from fn, or an error wrapping ErrCorrupt that names the
// entry when one fails its checks (records before it were delivered, none
// from it).
//
// Hole entries (lost to damage, skipped by a salvage) hold no record and are
// passed over.
//
// If the entries following after are gone (a segment file missing before
// the first one) the error wraps ErrNotFound and ErrCorrupt; a log opened
// with Config.Salvage logs it and replays from its first entry instead.
// When after's own entry is gone but the log starts at the very next entry,
// replay starts there: the caller truncated only what its snapshot covered.
func (l *Log) Replay(after uint64, fn func(pos uint64, rec []byte) error) error {
	first, last := l.first.Load(), l.last.Load()
	start, skip := first, -1
	if after != 0 {
		ai := PosIndex(after)
		switch {
		case ai >= first:
			start, skip = ai, PosRecord(after)
		case ai+1 < first && !l.cfg.Salvage:
			return fmt.Errorf("%w: %w: replay after position %d (entry %d) but the log starts at entry %d: "+
				"entries %d..%d are missing; salvage (regent serve --salvage, Config.Salvage) replays from entry %d",
				ErrCorrupt, ErrNotFound, after, ai, first, ai+1, first-1, first)
		case ai+1 < first:
			l.logger.Error("journal SALVAGE: the entries after the snapshot's are missing (before the first segment file); replaying from the first entry",
				"snapshot_entry", ai, "first_entry", first, "lost_entries", IndexRange{ai + 1, first - 1}.String())
		}
	}
	var d decoded
	for index := start; index <= last; index++ {
		if l.isHole(index) {
			continue
		}
		data, err := l.readEntry(index)
		if err == nil {
			err = decodeEntry(&d, data, index, l.cfg.MaxEntryBytes)
		}
		if err != nil {
			if errors.Is(err, ErrCorrupt) {
				err = fmt.Errorf("%w (the entries were checked at Open: this one went bad since; salvage "+
					"(regent serve --salvage, Config.Salvage) skips it at the next start)", err)
			}
			return err
		}
		r := 0
		if index == start {
			r = skip + 1
		}
		for ; r < len(d.spans); r++ {
			if err := fn(MakePos(index, r), d.record(r)); err != nil {
				return err
			}
		}
	}
	return nil
}

// held is how many bytes d keeps: its decompression buffer, and the body
// when that is not in the buffer (an uncompressed entry's stored bytes).
func (d *decoded) held() int {
	n := cap(d.buf)
	if cap(d.body) > 0 && (cap(d.buf) == 0 || &d.body[:1][0] != &d.buf[:1][0]) {
		n += cap(d.body)
	}
	return n
}
