package log

import (
	"bufio"
	"encoding/binary"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
)

// Reading one entry of an old segment.
//
// tidwall/wal reads an entry of a segment other than the tail by loading
// the whole segment file into memory and keeping the last SegmentCacheSize
// segments loaded. Consumers of different partitions read at different
// places in the journal, so with two segments cached a consume of a cold
// backlog loaded a whole segment (1 MiB by default) for almost every entry
// it read: a quarter of the broker's CPU went to os.ReadFile and to
// collecting what it allocated.
//
// Read therefore reads an old segment's entry itself, with one pread of the
// entry's frame, using the frame offsets of the segment; those are found
// once, by a scan of the file through a small buffer, and kept for the
// segments read lately (frameIndexEntries bounds them). Anything unexpected
// (the file's framing does not hold the entries its name and the next one
// promise, the file is missing or short, a segment past 4 GiB) sends the
// read to tidwall/wal, as before, which answers with the data or the error.

// frameIndexEntries bounds the frame offsets kept, over all segments: 4
// bytes each, so at most 4 MiB.
const frameIndexEntries = 1 << 20

// scanBufBytes is the buffer a segment's frames are found through.
const scanBufBytes = 64 << 10

// keepReadBytes is the largest scratch buffer kept from one read to the next.
const keepReadBytes = 1 << 20

// openSegments is how many segment files stay open between reads (opening
// and closing one per entry read cost a twentieth of a cold consume's CPU).
const openSegments = 4

// segFrames is where the frames of one segment file start: frame i (entry
// start+i) runs from offs[i] to offs[i+1].
type segFrames struct {
	offs []uint32
	used uint64
}

// frameIndex holds the frame offsets of the segments read lately (guarded
// by Log.readMu, and dropped with the entry cache when the files are put
// back after a failed write).
type frameIndex struct {
	tick    uint64
	entries int
	segs    map[uint64]*segFrames
	scans   uint64 // segment files scanned (for tests)
	preads  uint64 // entries read with a pread (for tests)
	scanBuf *bufio.Reader
	buf     []byte // the entry read last
	files   [openSegments]openSegment
	// unread are the segments whose frames are not as expected (or too
	// many to keep): their entries are read through tidwall/wal without
	// another scan.
	unread map[uint64]bool
}

// openSegment is a segment file kept open for reads.
type openSegment struct {
	start uint64
	f     *os.File
	used  uint64
}

// file returns segment start's file, opened in dir if it is not open yet
// (closing the least recently used one).
func (x *frameIndex) file(dir string, start uint64) (*os.File, error) {
	v := 0
	for i := range x.files {
		o := &x.files[i]
		if o.f != nil && o.start == start {
			x.tick++
			o.used = x.tick
			return o.f, nil
		}
		if o.f == nil || (x.files[v].f != nil && o.used < x.files[v].used) {
			v = i
		}
	}
	o := &x.files[v]
	if o.f != nil { // first, so that its descriptor is free for the next
		o.f.Close()
		*o = openSegment{}
	}
	f, err := os.Open(filepath.Join(dir, segmentName(start)))
	if err != nil {
		// Out of descriptors, perhaps: give back those kept, so that
		// tidwall/wal, which reads instead, has them.
		x.closeFiles()
		return nil, err
	}
	x.tick++
	*o = openSegment{start: start, f: f, used: x.tick}
	return f, nil
}

// closeFiles closes the segment files kept open: before the files are
// removed or put back, and at Close.
func (x *frameIndex) closeFiles() {
	for i := range x.files {
		if x.files[i].f != nil {
			x.files[i].f.Close()
		}
		x.files[i] = openSegment{}
	}
}

// lookup returns the frame offsets of the segment starting at start.
func (x *frameIndex) lookup(start uint64) *segFrames {
	f := x.segs[start]
	if f != nil {
		x.tick++
		f.used = x.tick
	}
	return f
}

// add keeps the frame offsets of a segment, dropping the least recently
// used ones while the total is past frameIndexEntries.
func (x *frameIndex) add(start uint64, offs []uint32) *segFrames {
	if x.segs == nil {
		x.segs = make(map[uint64]*segFrames)
	}
	for x.entries+len(offs) > frameIndexEntries && len(x.segs) > 0 {
		var lru uint64
		var old *segFrames
		for s, f := range x.segs {
			if old == nil || f.used < old.used {
				lru, old = s, f
			}
		}
		x.entries -= len(old.offs)
		delete(x.segs, lru)
	}
	x.tick++
	f := &segFrames{offs: offs, used: x.tick}
	x.segs[start] = f
	x.entries += len(offs)
	return f
}

// oldSegment returns the first index of the segment that holds entry index
// and of the one after it, or ok false when index is in the tail segment
// (tidwall/wal holds the tail in memory).
func (l *Log) oldSegment(index uint64) (start, next uint64, ok bool) {
	l.segMu.Lock()
	defer l.segMu.Unlock()
	k := sort.Search(len(l.segs), func(i int) bool { return l.segs[i].start > index }) - 1
	if k < 0 || k >= len(l.segs)-1 {
		return 0, 0, false
	}
	return l.segs[k].start, l.segs[k+1].start, true
}

// readOld reads the stored bytes of entry index from its segment file with
// one pread, when the entry is in a segment other than the tail and the
// segment's frames are as expected; ok false sends the caller to
// tidwall/wal. data is valid until the next call (the caller holds
// wmu.RLock and readMu).
func (l *Log) readOld(index uint64) (data []byte, ok bool) {
	start, next, ok := l.oldSegment(index)
	x := &l.cache.frames
	if !ok || x.unread[start] {
		return nil, false
	}
	f := x.lookup(start)
	if f == nil && next-start > frameIndexEntries {
		x.markUnread(start)
		return nil, false
	}
	file, err := x.file(l.walDir, start)
	if err != nil {
		return nil, false
	}
	if f == nil {
		offs, ok := x.scan(file, int(next-start))
		if !ok {
			x.markUnread(start)
			return nil, false
		}
		f = x.add(start, offs)
	}
	i := index - start
	from, to := int64(f.offs[i]), int64(f.offs[i+1])
	n := int(to - from)
	if cap(x.buf) < n {
		x.buf = make([]byte, n)
	}
	frame := x.buf[:n]
	if _, err := file.ReadAt(frame, from); err != nil {
		return nil, false
	}
	size, k := binary.Uvarint(frame)
	if k <= 0 || size != uint64(n-k) {
		return nil, false
	}
	x.preads++
	return frame[k:], true
}

// scan finds where the frames of a segment file start (a uvarint length,
// then the data), and their end; ok only when the file holds exactly want
// frames and nothing after them, in under 4 GiB.
func (x *frameIndex) scan(file *os.File, want int) (offs []uint32, ok bool) {
	x.scans++
	r := io.NewSectionReader(file, 0, math.MaxInt64) // the file may be open from before: not its offset
	if x.scanBuf == nil {
		x.scanBuf = bufio.NewReaderSize(r, scanBufBytes)
	} else {
		x.scanBuf.Reset(r)
	}
	defer x.scanBuf.Reset(nil)
	br := x.scanBuf
	offs = make([]uint32, 0, want+1)
	var off uint64
	for {
		if off > math.MaxUint32 {
			return nil, false
		}
		offs = append(offs, uint32(off))
		size, err := binary.ReadUvarint(br)
		if err == io.EOF {
			break
		}
		if err != nil || len(offs) > want || size > math.MaxUint32 {
			return nil, false
		}
		if _, err := br.Discard(int(size)); err != nil {
			return nil, false
		}
		off += uint64(recordFrameLen(int(size)))
	}
	if len(offs) != want+1 {
		return nil, false
	}
	return offs, true
}

// markUnread sends the reads of segment start to tidwall/wal from now on.
func (x *frameIndex) markUnread(start uint64) {
	if x.unread == nil {
		x.unread = make(map[uint64]bool)
	}
	x.unread[start] = true
}

// drop forgets what is known of segment start (TruncateFront removed it).
func (x *frameIndex) drop(start uint64) {
	if f := x.segs[start]; f != nil {
		x.entries -= len(f.offs)
		delete(x.segs, start)
	}
	delete(x.unread, start)
}

// release drops a scratch buffer that a large entry grew.
func (x *frameIndex) release() {
	if cap(x.buf) > keepReadBytes {
		x.buf = nil
	}
}
