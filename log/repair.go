package log

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
)

// scanResult describes the entries of one segment file.
type scanResult struct {
	entries int    // valid entries before the first bad one
	end     int    // offset just past them
	bad     bool   // something follows end that is not a valid entry
	reason  string // why the entry at end is bad
	runsOut bool   // its declared length runs past the end of the file
	zeros   bool   // every byte from end to EOF is zero
	// valid entries found after the first bad one by scanning for the entry
	// magic (resynchronizing): any means mid-log corruption.
	laterCount int
	laterOff   int
}

// scanSegment checks every entry of a segment file whose first index is
// start: tidwall's framing (uvarint size | data), our header and CRC, and that
// each entry carries the index it sits at.
func scanSegment(data []byte, start uint64) scanResult {
	var r scanResult
	off := 0
	for off < len(data) {
		size, n := binary.Uvarint(data[off:])
		switch {
		case n == 0:
			r.reason, r.runsOut = "length prefix cut by the end of the file", true
		case n < 0:
			r.reason = "length prefix overflows"
		case size > uint64(len(data)-off-n):
			r.reason = fmt.Sprintf("declared length %d runs %d bytes past the end of the file",
				size, size-uint64(len(data)-off-n))
			r.runsOut = true
		}
		if r.reason == "" {
			h, err := checkEntry(data[off+n : off+n+int(size)])
			switch {
			case err != nil:
				r.reason = err.Error()
			case h.index != start+uint64(r.entries):
				r.reason = fmt.Sprintf("entry carries index %d, expected %d", h.index, start+uint64(r.entries))
			}
		}
		if r.reason != "" {
			break
		}
		r.entries++
		off += n + int(size)
	}
	r.end = off
	if off == len(data) {
		return r
	}
	r.bad = true
	r.zeros = allZero(data[off:])
	if !r.zeros {
		r.laterCount, r.laterOff = findValidAfter(data, off)
	}
	return r
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// findValidAfter looks for valid entries that begin after offset from: at
// every occurrence of the entry magic it tries each uvarint length prefix
// that could precede it. It returns how many it found and the offset of the
// first (-1 if none).
func findValidAfter(data []byte, from int) (count, first int) {
	first = -1
	magic := []byte(entryMagic)
	for p := from + 1; p < len(data); {
		i := bytes.Index(data[p:], magic)
		if i < 0 {
			break
		}
		m := p + i
		p = m + 1
		for j := 1; j <= binary.MaxVarintLen32 && m-j > from; j++ {
			size, n := binary.Uvarint(data[m-j : m])
			if n != j || size > uint64(len(data)-m) {
				continue
			}
			if _, err := checkEntry(data[m : m+int(size)]); err == nil {
				if first < 0 {
					first = m - j
				}
				count++
				p = m + int(size)
				break
			}
		}
	}
	return count, first
}

// countFrames counts the (non-empty) entries that a damaged tail region
// seems to hold, for the repair message.
func countFrames(b []byte) int {
	n := 0
	for len(b) > 0 {
		size, k := binary.Uvarint(b)
		if k <= 0 || size > uint64(len(b)-k) {
			return n + 1 // a partial entry
		}
		if size > 0 {
			n++
		}
		b = b[k+int(size):]
	}
	return n
}

// repairWAL checks the last segment file of the WAL in dir before tidwall
// opens it (tidwall has no checksums: a torn tail would fail its Open and a
// zero-filled one would come back as empty entries).
//
// A torn tail, i.e. a bad entry after which no valid entry follows (its length
// runs past the end of the file, or only zeros follow, or it is the last entry
// and garbled), is truncated away, fsynced and logged. A bad entry followed by
// a valid one is mid-log corruption: Open fails with ErrCorrupt naming the
// file, offset and entry, unless salvage is set, in which case it is left to
// verifyWAL (which skips the damaged entries and keeps the valid ones).
func repairWAL(dir string, salvage bool, logger *slog.Logger) error {
	segs, err := listSegments(dir)
	if err != nil {
		return fmt.Errorf("log: repair: %w", err)
	}
	if len(segs) == 0 {
		return nil
	}
	last := segs[len(segs)-1]
	path := filepath.Join(dir, segmentName(last.start))
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("log: repair: %w", err)
	}
	r := scanSegment(data, last.start)
	if !r.bad {
		return nil
	}
	dropped := len(data) - r.end
	badIndex := last.start + uint64(r.entries)
	if r.laterCount > 0 {
		if salvage {
			return nil // verifyWAL skips the damaged entries
		}
		return fmt.Errorf("%w: wal segment %s: entry %d at offset %d is bad (%s) but %d valid entries follow "+
			"(the first at offset %d): mid-log corruption; refusing to open: salvage (regent serve --salvage, "+
			"Config.Salvage) skips the damaged entries, keeps every other one and reports what was lost",
			ErrCorrupt, path, badIndex, r.end, r.reason, r.laterCount, r.laterOff)
	}
	kind := "garbled last entry"
	droppedEntries := countFrames(data[r.end:])
	switch {
	case r.zeros:
		kind, droppedEntries = "zero-filled tail", 0
	case r.runsOut:
		kind = "last entry cut short"
	}
	logger.Warn("journal: repaired a torn tail", "file", path, "kind", kind, "offset", r.end,
		"dropped_bytes", dropped, "dropped_entries", droppedEntries, "reason", r.reason,
		"kept_entries", r.entries)
	if err := truncateSync(path, int64(r.end)); err != nil {
		return fmt.Errorf("log: repair: truncate %s at %d: %w", path, r.end, err)
	}
	return nil
}

// dropSnapshotsFrom removes the snapshots that cover entry index or later
// (after a salvage cut the journal there: the next entries written get those
// indexes again, and a snapshot claiming them would hide them from
// recovery). It returns their names.
func dropSnapshotsFrom(snapDir string, index uint64) ([]string, error) {
	snaps, err := readSnapshots(snapDir)
	if err != nil {
		return nil, fmt.Errorf("log: snapshots: %w", err)
	}
	var dropped []string
	for _, s := range snaps {
		if PosIndex(s.pos) >= index {
			if err := os.Remove(s.path); err != nil {
				return nil, fmt.Errorf("log: snapshots: %w", err)
			}
			dropped = append(dropped, filepath.Base(s.path))
		}
	}
	if len(dropped) > 0 {
		if err := syncDir(snapDir); err != nil {
			return nil, err
		}
	}
	return dropped, nil
}

// dropSnapshotsAhead removes the snapshots that cover entries the WAL does
// not hold: its tail was lost (a machine crash under SyncNone or
// SyncInterval, or files removed by hand). Kept, such a snapshot would hide
// the entries written next from recovery, their positions being below its
// own. It says so loudly; recovery then uses an older snapshot, or fails
// with ErrNotFound if the WAL no longer reaches back to one.
func (l *Log) dropSnapshotsAhead() error {
	last := l.last.Load()
	dropped, err := dropSnapshotsFrom(l.snapDir, last+1)
	if err != nil {
		return err
	}
	if len(dropped) > 0 {
		l.logger.Error("journal: snapshots cover entries the WAL does not hold (its tail was lost); removing them",
			"dir", l.dir, "last_index", last, "dropped_snapshots", dropped)
	}
	return nil
}

// snapInfo is a snapshot file and whether its checks hold.
type snapInfo struct {
	snapFile
	ok bool
}

// readSnapshots lists the snapshot files in dir, newest first, checking each.
func readSnapshots(dir string) ([]snapInfo, error) {
	files, err := (&Log{snapDir: dir}).listSnapshots()
	if err != nil {
		return nil, err
	}
	out := make([]snapInfo, len(files))
	for i, f := range files {
		out[i].snapFile = f
		if b, err := os.ReadFile(f.path); err == nil {
			p, _, err := decodeSnapshot(b)
			out[i].ok = err == nil && p == f.pos
		}
	}
	return out, nil
}
