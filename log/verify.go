package log

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// IndexRange is a range of WAL entry indexes, From to To inclusive.
type IndexRange struct{ From, To uint64 }

func (r IndexRange) String() string {
	if r.From == r.To {
		return fmt.Sprint(r.From)
	}
	return fmt.Sprintf("%d..%d", r.From, r.To)
}

// entries says "entry N is" or "entries N..M are".
func (r IndexRange) entries() string {
	if r.From == r.To {
		return fmt.Sprintf("entry %d is", r.From)
	}
	return fmt.Sprintf("entries %d..%d are", r.From, r.To)
}

// frame is one entry found in a segment file: its index and the bytes of
// its tidwall frame (length prefix and entry) at [off, end).
type frame struct {
	index    uint64
	off, end int
	hole     bool
}

// damage is one damaged place in a segment file.
type damage struct {
	offset int    // where the bad bytes start
	bytes  int    // how many bytes are bad (up to the next good entry or the end of the file)
	reason string // why the entry at offset is bad
	// lost is the entries that the bad bytes held (From > To: none, only
	// stray bytes); for a segment that ends early, the entries up to the
	// next segment's start.
	lost IndexRange
}

// segCheck is what verifying one segment file found.
type segCheck struct {
	seg     segment
	path    string
	frames  []frame // good entries (and holes), ascending
	damages []damage
}

// checkSegment verifies every entry of a segment file whose first index is
// start: tidwall's framing (uvarint size | data), our header and CRC, and
// that each entry carries the index it sits at. limit is the next segment's
// first index (0 for the last segment): the file must hold exactly the
// entries [start, limit). After a bad entry it looks for the next valid one
// (scanning for the entry magic: every entry carries its index), so that
// the entries after damage are kept and the lost ones are known exactly.
func checkSegment(data []byte, start, limit uint64) (frames []frame, damages []damage) {
	expect := start
	off := 0
	for off < len(data) {
		size, n := binary.Uvarint(data[off:])
		reason := ""
		switch {
		case n == 0:
			reason = "length prefix cut by the end of the file"
		case n < 0:
			reason = "length prefix overflows"
		case size > uint64(len(data)-off-n):
			reason = fmt.Sprintf("declared length %d runs %d bytes past the end of the file", size, size-uint64(len(data)-off-n))
		}
		var h entryHeader
		if reason == "" {
			var err error
			h, err = checkEntry(data[off+n : off+n+int(size)])
			switch {
			case err != nil:
				reason = err.Error()
			case h.index != expect:
				reason = fmt.Sprintf("entry carries index %d, expected %d", h.index, expect)
			case limit != 0 && h.index >= limit:
				reason = fmt.Sprintf("entry %d belongs to the next segment (it starts at %d)", h.index, limit)
			}
		}
		if reason == "" {
			end := off + n + int(size)
			frames = append(frames, frame{index: expect, off: off, end: end, hole: h.count == 0})
			expect++
			off = end
			continue
		}
		next, index, ok := resync(data, off, expect, limit)
		if !ok {
			d := damage{offset: off, bytes: len(data) - off, reason: reason, lost: IndexRange{expect, expect - 1}}
			if limit != 0 {
				d.lost.To = limit - 1
				expect = limit
			}
			damages = append(damages, d)
			return frames, damages
		}
		damages = append(damages, damage{offset: off, bytes: next - off, reason: reason, lost: IndexRange{expect, index - 1}})
		expect, off = index, next
	}
	if limit != 0 && expect < limit {
		damages = append(damages, damage{offset: len(data), reason: fmt.Sprintf(
			"the segment ends after entry %d but the next segment file, %s, starts at entry %d "+
				"(a segment file such as %s deleted, or this one cut short)",
			expect-1, segmentName(limit), limit, segmentName(expect)),
			lost: IndexRange{expect, limit - 1}})
	}
	return frames, damages
}

// resync finds the first valid entry that begins at or after offset from
// and carries an index in [expect, limit) (limit 0: no bound): at every
// occurrence of the entry magic it tries each uvarint length prefix that
// could precede it. It returns the offset of its frame and its index.
func resync(data []byte, from int, expect, limit uint64) (next int, index uint64, ok bool) {
	magic := []byte(entryMagic)
	for p := from; p < len(data); {
		i := bytes.Index(data[p:], magic)
		if i < 0 {
			return 0, 0, false
		}
		m := p + i
		p = m + 1
		for j := 1; j <= binary.MaxVarintLen32 && m-j >= from; j++ {
			size, n := binary.Uvarint(data[m-j : m])
			if n != j || size > uint64(len(data)-m) {
				continue
			}
			h, err := checkEntry(data[m : m+int(size)])
			if err == nil && h.index >= expect && (limit == 0 || h.index < limit) {
				return m - j, h.index, true
			}
		}
	}
	return 0, 0, false
}

// verifyWAL checks every segment file of the WAL in walDir (the last one's
// torn tail was repaired already): that the segments follow each other (each
// starts where the previous one ended) and every entry's framing, CRC and
// index. It returns the entries lost to an earlier salvage (holes).
//
// On damage it refuses with an error wrapping ErrCorrupt that names the file,
// the entry and Config.Salvage; with salvage it rewrites each damaged
// segment file with its good entries as they were and a hole entry in place
// of every entry lost (the original goes to Dir/damaged/), logs what was lost,
// and returns those entries with the holes.
func verifyWAL(dir, walDir string, salvage bool, logger *slog.Logger) ([]IndexRange, error) {
	segs, err := listSegments(walDir)
	if err != nil {
		return nil, fmt.Errorf("log: verify: %w", err)
	}
	var holes []IndexRange
	var bad []segCheck
	for i, s := range segs {
		limit := uint64(0)
		if i+1 < len(segs) {
			limit = segs[i+1].start
		}
		path := filepath.Join(walDir, segmentName(s.start))
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("log: verify: %w", err)
		}
		frames, damages := checkSegment(data, s.start, limit)
		for _, f := range frames {
			if f.hole {
				holes = addIndex(holes, f.index)
			}
		}
		if len(damages) > 0 {
			bad = append(bad, segCheck{seg: s, path: path, frames: frames, damages: damages})
		}
	}
	if len(bad) == 0 {
		return holes, nil
	}
	if !salvage {
		return nil, damageError(bad)
	}
	for _, sc := range bad {
		if err := rewriteSegment(dir, sc, logger); err != nil {
			return nil, err
		}
		for _, d := range sc.damages {
			for ix := d.lost.From; ix <= d.lost.To && d.lost.From <= d.lost.To; ix++ {
				holes = addIndex(holes, ix)
			}
		}
	}
	if err := syncDir(walDir); err != nil {
		return nil, err
	}
	return holes, nil
}

// addIndex adds ix to a sorted list of ranges (ix is at or above every index
// in it, or inside it).
func addIndex(rs []IndexRange, ix uint64) []IndexRange {
	if n := len(rs); n > 0 && rs[n-1].To+1 >= ix {
		rs[n-1].To = max(rs[n-1].To, ix)
		return rs
	}
	return append(rs, IndexRange{ix, ix})
}

// damageError describes every damaged place, the first in full.
func damageError(bad []segCheck) error {
	first := bad[0]
	d := first.damages[0]
	var b strings.Builder
	fmt.Fprintf(&b, "wal segment %s: ", first.path)
	if d.bytes == 0 {
		fmt.Fprintf(&b, "%s: %s missing", d.reason, d.lost.entries())
	} else {
		fmt.Fprintf(&b, "entry %d at offset %d is bad (%s)", d.lost.From, d.offset, d.reason)
		if d.lost.From < d.lost.To {
			fmt.Fprintf(&b, "; %s lost", d.lost.entries())
		}
	}
	n := 0
	var lost uint64
	for _, sc := range bad {
		for _, d := range sc.damages {
			n++
			if d.lost.From <= d.lost.To {
				lost += d.lost.To - d.lost.From + 1
			}
		}
	}
	if n > 1 {
		fmt.Fprintf(&b, " (%d damaged places in %d segment files, %d entries lost in all)", n, len(bad), lost)
	}
	return fmt.Errorf("%w: %s; refusing to open: salvage (regent serve --salvage, Config.Salvage) skips the damaged "+
		"entries, keeps every other one and reports what was lost", ErrCorrupt, b.String())
}

// holeFrame is the tidwall frame of a hole entry at index: an entry that
// holds no record and says that the one written there was lost to damage.
func holeFrame(index uint64) []byte {
	e := make([]byte, entryHeaderLen)
	copy(e, entryMagic)
	e[entryVersionOff] = entryVersion
	e[entryCodecOff] = codecRaw
	binary.LittleEndian.PutUint64(e[entryIndexOff:], index)
	binary.LittleEndian.PutUint32(e[entryCRCOff:], crc32c(e[entryCRCOff+4:]))
	return append(binary.AppendUvarint(nil, uint64(len(e))), e...)
}

// rewriteSegment replaces a damaged segment file with its good entries and a
// hole entry for each lost one, keeping the original under Dir/damaged/.
// The new image is written beside it, fsynced and renamed over it, so a
// crash leaves one or the other.
func rewriteSegment(dir string, sc segCheck, logger *slog.Logger) error {
	data, err := os.ReadFile(sc.path)
	if err != nil {
		return fmt.Errorf("log: salvage: %w", err)
	}
	img := make([]byte, 0, len(data))
	fi := 0
	last := sc.seg.start - 1
	if n := len(sc.frames); n > 0 {
		last = sc.frames[n-1].index
	}
	for _, d := range sc.damages {
		if d.lost.From <= d.lost.To {
			last = max(last, d.lost.To)
		}
	}
	var lost uint64
	for ix := sc.seg.start; ix <= last; ix++ {
		if fi < len(sc.frames) && sc.frames[fi].index == ix {
			img = append(img, data[sc.frames[fi].off:sc.frames[fi].end]...)
			fi++
			continue
		}
		img = append(img, holeFrame(ix)...)
		lost++
	}
	keep, err := keepDamaged(dir, sc.path, data)
	if err != nil {
		return err
	}
	tmp := sc.path + ".salvage"
	if err := writeFileSync(tmp, img); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("log: salvage: %w", err)
	}
	if err := os.Rename(tmp, sc.path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("log: salvage: %w", err)
	}
	for _, d := range sc.damages {
		lostText := "none (stray bytes)"
		if d.lost.From <= d.lost.To {
			lostText = d.lost.String()
		}
		logger.Error("journal SALVAGE: damaged WAL entries skipped; each lost entry is replaced by a hole, every other entry is kept",
			"file", sc.path, "offset", d.offset, "bad_bytes", d.bytes, "reason", d.reason,
			"lost_entries", lostText, "original_kept_as", keep)
	}
	return nil
}

// damagedDirName is where salvage keeps the files it replaced.
const damagedDirName = "damaged"

// keepDamaged stores a copy of a file a salvage replaces (data, read from
// path) under Dir/damaged/, named after it and the time, and returns its
// path.
func keepDamaged(dir, path string, data []byte) (string, error) {
	dd := filepath.Join(dir, damagedDirName)
	if err := os.MkdirAll(dd, 0o750); err != nil {
		return "", fmt.Errorf("log: salvage: %w", err)
	}
	dst := filepath.Join(dd, fmt.Sprintf("%s-%s.%d", filepath.Base(filepath.Dir(path)), filepath.Base(path), time.Now().UnixNano()))
	if err := os.Link(path, dst); err != nil {
		if err := writeFileSync(dst, data); err != nil {
			return "", fmt.Errorf("log: salvage: keeping a copy of %s: %w", path, err)
		}
	}
	if err := syncDir(dd); err != nil {
		return "", err
	}
	return dst, nil
}

// removeSalvageTemps deletes images a crash in rewriteSegment left.
func removeSalvageTemps(walDir string) error {
	ents, err := os.ReadDir(walDir)
	if err != nil {
		return fmt.Errorf("log: salvage: %w", err)
	}
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".salvage") {
			if err := os.Remove(filepath.Join(walDir, e.Name())); err != nil {
				return fmt.Errorf("log: salvage: %w", err)
			}
		}
	}
	return nil
}

// Lost returns the WAL entries that damage took and a salvage skipped (in
// this Open or an earlier one: the holes the WAL holds), ascending; entries
// before FirstIndex are not listed.
func (l *Log) Lost() []IndexRange {
	first := l.first.Load()
	var out []IndexRange
	for _, r := range l.holes {
		if r.To < first {
			continue
		}
		out = append(out, IndexRange{max(r.From, first), r.To})
	}
	return out
}

// Salvaged reports whether the log was opened with Config.Salvage or holds
// entries lost to an earlier salvage: what it replays may then miss
// records, and its reader (the engine) must rebuild what it can from the
// rest.
func (l *Log) Salvaged() bool { return l.cfg.Salvage || len(l.holes) > 0 }

// CheckFront returns nil when the log still starts at its first entry
// (index 1); otherwise the first entry it holds and Check's error for entry
// 1 (a log without a snapshot that starts later lost what its first segment
// files held).
func (l *Log) CheckFront() (first uint64, err error) {
	starts := l.SegmentStarts()
	if len(starts) == 0 || starts[0] <= 1 {
		return 0, nil
	}
	return starts[0], l.Check(MakePos(1, 0))
}

// Check reports whether the entry holding pos passed its checks at Open and
// is still in the log: nil if so; otherwise an error wrapping ErrCorrupt
// (and ErrLost for an entry a salvage skipped) that names it.
func (l *Log) Check(pos uint64) error {
	index := PosIndex(pos)
	first, last := l.first.Load(), l.last.Load()
	switch {
	case index == 0 || index > last:
		return fmt.Errorf("%w: %w: position %d: entry %d is not in the journal (it ends at entry %d)", ErrCorrupt, ErrNotFound, pos, index, last)
	case index < first:
		return fmt.Errorf("%w: %w: position %d: entry %d is before the journal's first entry %d (a segment file is missing)", ErrCorrupt, ErrNotFound, pos, index, first)
	}
	if l.isHole(index) {
		return fmt.Errorf("%w: %w: position %d: entry %d was lost to damage (a salvage skipped it)", ErrCorrupt, ErrLost, pos, index)
	}
	return nil
}

func (l *Log) isHole(index uint64) bool {
	i := sort.Search(len(l.holes), func(i int) bool { return l.holes[i].To >= index })
	return i < len(l.holes) && l.holes[i].From <= index
}

// ErrLost: the entry was lost to damage; a salvage left a hole in its place.
// Errors wrapping it wrap ErrCorrupt too.
var ErrLost = errors.New("log: entry lost to damage")
