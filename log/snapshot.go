package log

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Snapshot file layout (little-endian; see doc.go):
//
//	magic "RGNS" | crc32c | version | codec | pos | rawLen | dataLen | data
const (
	snapMagic     = "RGNS"
	snapVersion   = 1
	snapHeaderLen = 34
	snapPrefix    = "snap-"
	snapSuffix    = ".rsnap"
	snapTmpSuffix = ".tmp"
	snapKeep      = 2
)

func snapName(pos uint64) string { return fmt.Sprintf("%s%020d%s", snapPrefix, pos, snapSuffix) }

// encodeSnapshot builds a snapshot file image.
func encodeSnapshot(pos uint64, data []byte) []byte {
	buf := make([]byte, snapHeaderLen, snapHeaderLen+len(data)/2+64)
	codec := byte(codecRaw)
	if len(data) >= minCompressBytes {
		out := mustCodecs().enc.EncodeAll(data, buf)
		if len(out)-snapHeaderLen < len(data) {
			buf, codec = out, codecZstd
		} else {
			buf = append(out[:snapHeaderLen], data...)
		}
	} else {
		buf = append(buf, data...)
	}
	copy(buf, snapMagic)
	buf[8] = snapVersion
	buf[9] = codec
	binary.LittleEndian.PutUint64(buf[10:], pos)
	binary.LittleEndian.PutUint64(buf[18:], uint64(len(data)))
	binary.LittleEndian.PutUint64(buf[26:], uint64(len(buf)-snapHeaderLen))
	binary.LittleEndian.PutUint32(buf[4:], crc32c(buf[8:]))
	return buf
}

// decodeSnapshot checks a snapshot file image and returns its position and
// data. Every error wraps ErrCorrupt.
func decodeSnapshot(b []byte) (uint64, []byte, error) {
	if len(b) < snapHeaderLen {
		return 0, nil, fmt.Errorf("%w: snapshot of %d bytes is shorter than its header", ErrCorrupt, len(b))
	}
	if string(b[:4]) != snapMagic {
		return 0, nil, fmt.Errorf("%w: bad snapshot magic %q", ErrCorrupt, b[:4])
	}
	if want, got := binary.LittleEndian.Uint32(b[4:]), crc32c(b[8:]); want != got {
		return 0, nil, fmt.Errorf("%w: snapshot checksum mismatch (stored %08x, computed %08x)", ErrCorrupt, want, got)
	}
	if b[8] != snapVersion {
		return 0, nil, fmt.Errorf("%w: unknown snapshot version %d", ErrCorrupt, b[8])
	}
	pos := binary.LittleEndian.Uint64(b[10:])
	rawLen := binary.LittleEndian.Uint64(b[18:])
	dataLen := binary.LittleEndian.Uint64(b[26:])
	body := b[snapHeaderLen:]
	if dataLen != uint64(len(body)) {
		return 0, nil, fmt.Errorf("%w: snapshot body is %d bytes, header says %d", ErrCorrupt, len(body), dataLen)
	}
	switch b[9] {
	case codecRaw:
		if rawLen != dataLen {
			return 0, nil, fmt.Errorf("%w: raw snapshot of %d bytes claims %d", ErrCorrupt, dataLen, rawLen)
		}
		return pos, body, nil
	case codecZstd:
		if rawLen > zstdMaxDecodedBytes {
			return 0, nil, fmt.Errorf("%w: snapshot claims %d bytes (limit %d)", ErrCorrupt, rawLen, zstdMaxDecodedBytes)
		}
		out, err := mustCodecs().dec.DecodeAll(body, make([]byte, 0, rawLen))
		if err != nil {
			return 0, nil, fmt.Errorf("%w: snapshot does not decompress: %v", ErrCorrupt, err)
		}
		if uint64(len(out)) != rawLen {
			return 0, nil, fmt.Errorf("%w: snapshot decompressed to %d bytes, header says %d", ErrCorrupt, len(out), rawLen)
		}
		return pos, out, nil
	}
	return 0, nil, fmt.Errorf("%w: unknown snapshot codec %d", ErrCorrupt, b[9])
}

// WriteSnapshot durably stores data as the snapshot covering every record up
// to pos: it writes a temporary file, fsyncs it, renames it into place and
// fsyncs the directory, so a crash leaves either the old set or the new one.
// The newest two snapshots (by pos) are kept.
func (l *Log) WriteSnapshot(pos uint64, data []byte) error {
	l.snapMu.Lock()
	defer l.snapMu.Unlock()
	l.mu.Lock()
	closing := l.closing
	l.mu.Unlock()
	if closing {
		return ErrClosed
	}
	img := encodeSnapshot(pos, data)
	final := filepath.Join(l.snapDir, snapName(pos))
	tmp := final + snapTmpSuffix
	if err := writeFileSync(tmp, img); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("log: write snapshot: %w", err)
	}
	if err := os.Rename(tmp, final); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("log: write snapshot: %w", err)
	}
	if err := syncDir(l.snapDir); err != nil {
		return err
	}
	return l.pruneSnapshots()
}

func writeFileSync(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o640)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// snapFile is one snapshot file found in the snapshot directory.
type snapFile struct {
	pos  uint64
	path string
}

// listSnapshots returns the snapshot files, newest (highest pos) first.
func (l *Log) listSnapshots() ([]snapFile, error) {
	ents, err := os.ReadDir(l.snapDir)
	if err != nil {
		return nil, fmt.Errorf("log: list snapshots: %w", err)
	}
	var out []snapFile
	for _, e := range ents {
		name := e.Name()
		if e.IsDir() || !strings.HasPrefix(name, snapPrefix) || !strings.HasSuffix(name, snapSuffix) {
			continue
		}
		pos, err := strconv.ParseUint(name[len(snapPrefix):len(name)-len(snapSuffix)], 10, 64)
		if err != nil {
			continue
		}
		out = append(out, snapFile{pos: pos, path: filepath.Join(l.snapDir, name)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].pos > out[j].pos })
	return out, nil
}

func (l *Log) pruneSnapshots() error {
	files, err := l.listSnapshots()
	if err != nil || len(files) <= snapKeep {
		return err
	}
	for _, f := range files[snapKeep:] {
		if err := os.Remove(f.path); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("log: prune snapshots: %w", err)
		}
	}
	return syncDir(l.snapDir)
}

// removeSnapTemps deletes temporary files left by a crash in WriteSnapshot.
func removeSnapTemps(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("log: snapshots: %w", err)
	}
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), snapTmpSuffix) {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				return fmt.Errorf("log: snapshots: %w", err)
			}
		}
	}
	return nil
}

// LoadSnapshot returns the newest snapshot whose checks hold. A newest one
// that fails them is skipped with a warning naming the file and why, and the
// older one is used. ok is false when there is no snapshot at all; when
// snapshots exist but none is usable the error wraps ErrCorrupt, naming
// salvage. With Config.Salvage the unusable snapshots are moved to
// Dir/damaged/ instead, loudly, and ok is false: the caller rebuilds its
// state from the WAL (whole when it holds every entry from 1).
func (l *Log) LoadSnapshot() (pos uint64, data []byte, ok bool, err error) {
	l.snapMu.Lock()
	defer l.snapMu.Unlock()
	files, err := l.listSnapshots()
	if err != nil || len(files) == 0 {
		return 0, nil, false, err
	}
	var errs []error
	for _, f := range files {
		b, err := os.ReadFile(f.path)
		if err == nil {
			var p uint64
			p, data, err = decodeSnapshot(b)
			if err == nil && p != f.pos {
				err = fmt.Errorf("%w: file name says position %d, contents say %d", ErrCorrupt, f.pos, p)
			}
			if err == nil {
				return p, data, true, nil
			}
		}
		l.logger.Warn("journal: snapshot unusable, falling back to an older one", "file", f.path, "err", err)
		errs = append(errs, fmt.Errorf("%s: %w", f.path, err))
	}
	if !l.cfg.Salvage {
		return 0, nil, false, fmt.Errorf("log: no usable snapshot: %w (salvage, regent serve --salvage or Config.Salvage, "+
			"sets them aside and rebuilds the state from the journal, whole if it holds every entry from 1; it holds entries %d..%d)",
			errors.Join(errs...), l.first.Load(), l.last.Load())
	}
	var kept []string
	for _, f := range files {
		b, _ := os.ReadFile(f.path)
		k, err := keepDamaged(l.dir, f.path, b)
		if err != nil {
			return 0, nil, false, err
		}
		if err := os.Remove(f.path); err != nil {
			return 0, nil, false, fmt.Errorf("log: salvage: %w", err)
		}
		kept = append(kept, k)
	}
	if err := syncDir(l.snapDir); err != nil {
		return 0, nil, false, err
	}
	lost := "none: the journal holds every entry from 1"
	if first := l.first.Load(); first > 1 {
		lost = fmt.Sprintf("entries 1..%d (the journal starts at entry %d): what only they held is unknown", first-1, first)
	}
	l.logger.Error("journal SALVAGE: no usable snapshot; they are set aside and the state is rebuilt from the journal alone",
		"moved_to", kept, "first_entry", l.first.Load(), "last_entry", l.last.Load(), "lost_entries", lost,
		"errors", errors.Join(errs...).Error())
	return 0, nil, false, nil
}
