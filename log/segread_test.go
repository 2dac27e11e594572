package log

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// bytesRead is what this process has read with read system calls so far
// (rchar in /proc/self/io, page cache included).
func bytesRead(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		t.Skipf("no /proc/self/io: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "rchar: "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Skip("no rchar in /proc/self/io")
	return 0
}

// TestInterleavedReadersReadEachSegmentOnce: sixteen readers at sixteen
// places in the journal (consumers of partitions that lag by different
// amounts) read the entries of old segments. The segment files are read
// about once: before, every entry read past the entry cache loaded its
// whole segment (tidwall/wal keeps two loaded), and a consume of a cold
// backlog spent a quarter of the broker's CPU in os.ReadFile.
func TestInterleavedReadersReadEachSegmentOnce(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc/self/io")
	}
	const entries, readers = 640, 16
	dir := t.TempDir()
	l, _ := openT(t, dir, withSegment(16<<10))
	r := rand.New(rand.NewPCG(1, 2))
	want := make([][]byte, entries+1)
	for i := 1; i <= entries; i++ {
		want[i] = payload(r, 1500, true)
		if pos := appendWait(t, l, want[i]); PosIndex(pos) != uint64(i) || PosRecord(pos) != 0 {
			t.Fatalf("record %d went to position %d", i, pos)
		}
	}
	journal := l.DiskBytes()
	segs := len(l.SegmentStarts())
	if segs < 2*readers {
		t.Fatalf("%d segments: the test wants the readers in different ones", segs)
	}
	before := bytesRead(t)
	const per = entries / readers
	for step := 0; step < per; step++ {
		for k := 0; k < readers; k++ {
			i := uint64(k*per + step + 1)
			b, err := l.Read(MakePos(i, 0))
			if err != nil {
				t.Fatalf("entry %d: %v", i, err)
			}
			if !bytes.Equal(b, want[i]) {
				t.Fatalf("entry %d: wrong data", i)
			}
		}
	}
	read := bytesRead(t) - before
	t.Logf("%d segments, %d bytes of journal, %d bytes read, %d segment scans, %d preads",
		segs, journal, read, l.cache.frames.scans, l.cache.frames.preads)
	if read > 3*journal {
		t.Fatalf("reading a journal of %d bytes once read %d bytes", journal, read)
	}
	if l.cache.frames.scans > uint64(segs) {
		t.Fatalf("%d scans of %d segment files", l.cache.frames.scans, segs)
	}
}

// TestUncompressedEntryKeptWhole: an entry stored uncompressed (random
// bytes do not compress) is read into a buffer the next read reuses; the
// entry cache keeps its own copy, so reading it again from the cache after
// another entry was read gives its data, not the other's.
func TestUncompressedEntryKeptWhole(t *testing.T) {
	dir := t.TempDir()
	l, _ := openT(t, dir, withSegment(8<<10))
	r := rand.New(rand.NewPCG(3, 4))
	const entries = 40
	want := make([][]byte, entries+1)
	for i := 1; i <= entries; i++ {
		want[i] = payload(r, 3000, false)
		appendWait(t, l, want[i])
	}
	read := func(i uint64) {
		t.Helper()
		b, err := l.Read(MakePos(i, 0))
		if err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		if !bytes.Equal(b, want[i]) {
			t.Fatalf("entry %d: wrong data", i)
		}
	}
	seg, err := os.ReadFile(segmentFiles(t, dir)[0])
	if err != nil {
		t.Fatal(err)
	}
	_, n := binary.Uvarint(seg)
	if seg[n+entryCodecOff] == codecZstd {
		t.Fatal("the test wants entries stored uncompressed")
	}
	for _, i := range []uint64{1, 10, 1, 20, 10, 2, 1, 20} {
		read(i)
	}
	if l.cache.frames.preads == 0 {
		t.Fatal("no entry was read with a pread")
	}
}

// TestTruncateFrontClosesReadFiles: the segment files Read keeps open are
// closed when TruncateFront removes segments, so that the space of the
// removed files is given back to the disk.
func TestTruncateFrontClosesReadFiles(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc/self/fd")
	}
	dir := t.TempDir()
	l := randomJournal(t, dir, 60)
	starts := l.SegmentStarts()
	if len(starts) < openSegments+2 {
		t.Fatalf("%d segments", len(starts))
	}
	for _, s := range starts[:len(starts)-2] {
		if _, err := l.Read(MakePos(s, 0)); err != nil {
			t.Fatal(err)
		}
	}
	if l.cache.frames.preads == 0 {
		t.Fatal("no entry was read with a pread")
	}
	if err := l.TruncateFront(starts[len(starts)-2]); err != nil {
		t.Fatal(err)
	}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip(err)
	}
	for _, fd := range fds {
		target, err := os.Readlink("/proc/self/fd/" + fd.Name())
		if err == nil && strings.Contains(target, dir) && strings.HasSuffix(target, "(deleted)") {
			t.Fatalf("descriptor %s still holds %s", fd.Name(), target)
		}
	}
}

// TestUnexpectedFramesScannedOnce: a segment whose frames are not what its
// name and the next one's promise (cut short after Open) is scanned once;
// its later reads go to tidwall/wal (an error wrapping ErrCorrupt here)
// without another scan of the file.
func TestUnexpectedFramesScannedOnce(t *testing.T) {
	dir := t.TempDir()
	l := randomJournal(t, dir, 30)
	starts := l.SegmentStarts()
	files := segmentFiles(t, dir)
	if len(starts) < 4 || len(files) != len(starts) {
		t.Fatalf("%d segments, %d files", len(starts), len(files))
	}
	if err := os.Truncate(files[1], 10); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if _, err := l.Read(MakePos(starts[1], 0)); !isErr(err, ErrCorrupt) {
			t.Fatalf("read of a cut segment: %v", err)
		}
	}
	if n := l.cache.frames.scans; n != 1 {
		t.Fatalf("%d scans of the cut segment", n)
	}
	if _, err := l.Read(MakePos(starts[2], 0)); err != nil {
		t.Fatalf("the next segment: %v", err)
	}
}

// randomJournal opens a log in dir with 4 KiB segments and appends n
// records of 1,000 random bytes (stored uncompressed), one entry each.
func randomJournal(t *testing.T, dir string, n int) *Log {
	t.Helper()
	l, _ := openT(t, dir, withSegment(4<<10))
	r := rand.New(rand.NewPCG(uint64(n), 8))
	for range n {
		appendWait(t, l, payload(r, 1000, false))
	}
	return l
}

// TestUncompressedEntriesCountedAtTheirSize: uncompressed entries of the
// tail segment (tidwall/wal's copy in memory) are counted in the entry
// cache at their own size, so sixteen readers four entries apart decode
// each once. Kept as slices of the segment's buffer, each counted at the
// buffer's size, and the cache held one entry at a time: 4,401 decodes of
// 300 entries.
func TestUncompressedEntriesCountedAtTheirSize(t *testing.T) {
	const entries, readers, lag = 300, 16, 4
	l, _ := openT(t, t.TempDir())
	r := rand.New(rand.NewPCG(9, 10))
	want := make([][]byte, entries+1)
	for i := 1; i <= entries; i++ {
		want[i] = payload(r, 3000, false)
		appendWait(t, l, want[i])
	}
	if n := len(l.SegmentStarts()); n != 1 {
		t.Fatalf("%d segments: the test wants the entries in the tail", n)
	}
	for step := 0; step < entries+readers*lag; step++ {
		for k := 0; k < readers; k++ {
			if i := step - k*lag + 1; i >= 1 && i <= entries {
				b, err := l.Read(MakePos(uint64(i), 0))
				if err != nil || !bytes.Equal(b, want[i]) {
					t.Fatalf("entry %d: %v", i, err)
				}
			}
		}
	}
	if l.cache.decodes != entries {
		t.Fatalf("%d decodes of %d entries", l.cache.decodes, entries)
	}
}
