package log

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// buildJournal writes n entries of one record each (record i is rec(i)) and
// closes the log. It returns the records.
func buildJournal(t *testing.T, dir string, n int, rec func(i int) []byte, mods ...func(*Config)) []string {
	t.Helper()
	l, _ := openT(t, dir, mods...)
	var recs []string
	for i := 0; i < n; i++ {
		r := rec(i)
		if p := appendWait(t, l, r); PosIndex(p) != uint64(i+1) || PosRecord(p) != 0 {
			t.Fatalf("record %d at %d", i, p)
		}
		recs = append(recs, string(r))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return recs
}

// randRec makes incompressible records, so entries are stored raw and every
// byte of them matters.
func randRec(size int) func(i int) []byte {
	r := rand.New(rand.NewPCG(3, 4))
	return func(i int) []byte { return append(fmt.Appendf(nil, "rec-%d-", i), payload(r, size, false)...) }
}

// expectEntries opens dir, checks that it holds exactly want (one record per
// entry, indexes from 1) and that appending continues right after them.
func expectEntries(t *testing.T, dir string, want []string, what string) *logSink {
	t.Helper()
	l, sink, err := tryOpen(dir)
	if err != nil {
		t.Fatalf("%s: Open: %v", what, err)
	}
	defer l.Close()
	got, err := replayAll(l, 0)
	if err != nil {
		t.Fatalf("%s: Replay: %v", what, err)
	}
	if len(got) != len(want) {
		t.Fatalf("%s: replayed %d records, want %d", what, len(got), len(want))
	}
	for i, g := range got {
		if g.rec != want[i] || g.pos != MakePos(uint64(i+1), 0) {
			t.Fatalf("%s: record %d differs (pos %d)", what, i, g.pos)
		}
	}
	if l.LastIndex() != uint64(len(want)) {
		t.Fatalf("%s: LastIndex %d, want %d", what, l.LastIndex(), len(want))
	}
	if p := appendWait(t, l, []byte("next")); PosIndex(p) != uint64(len(want)+1) {
		t.Fatalf("%s: next append at index %d", what, PosIndex(p))
	}
	return sink
}

func onlySegment(t *testing.T, dir string) string {
	t.Helper()
	files := segmentFiles(t, dir)
	if len(files) != 1 {
		t.Fatalf("want one segment, have %v", files)
	}
	return files[0]
}

// TestTornTailEveryCut cuts the last entry at every byte position: the
// journal opens with exactly the entries before it.
func TestTornTailEveryCut(t *testing.T) {
	dir := t.TempDir()
	recs := buildJournal(t, dir, 5, randRec(120))
	seg := onlySegment(t, dir)
	data, _ := os.ReadFile(seg)
	fr := frames(t, data)
	last := fr[len(fr)-1]
	for cut := last[0]; cut < last[1]; cut++ {
		if err := os.WriteFile(seg, data[:cut], 0o640); err != nil {
			t.Fatal(err)
		}
		what := fmt.Sprintf("cut at %d (entry spans %d..%d)", cut, last[0], last[1])
		sink := expectEntries(t, dir, recs[:4], what)
		if cut > last[0] {
			msg, ok := sink.find("WARN", "torn tail", fmt.Sprintf("dropped_bytes=%d", cut-last[0]))
			if !ok {
				t.Fatalf("%s: no warning:\n%s", what, sink.all())
			}
			if !strings.Contains(msg, "dropped_entries=1") {
				t.Fatalf("%s: warning does not count the entry: %s", what, msg)
			}
		}
	}
}

// TestTornTailZeros: a tail of zeros (as a crash can leave) after whole or
// partial entries is dropped, never read as empty entries.
func TestTornTailZeros(t *testing.T) {
	dir := t.TempDir()
	recs := buildJournal(t, dir, 5, randRec(100))
	seg := onlySegment(t, dir)
	data, _ := os.ReadFile(seg)
	fr := frames(t, data)
	last := fr[len(fr)-1]
	for _, tc := range []struct {
		name  string
		keep  int // bytes of the file kept before the zeros
		zeros int
		want  int // entries expected
	}{
		{"after-all/1", len(data), 1, 5},
		{"after-all/2", len(data), 2, 5},
		{"after-all/7", len(data), 7, 5},
		{"after-all/4096", len(data), 4096, 5},
		{"after-all/100000", len(data), 100000, 5},
		{"after-partial-prefix/10", last[0] + 1, 10, 4},
		{"after-partial-header/300", last[0] + 10, 300, 4},
		{"over-last-entry-body/64", last[1] - 20, 64, 4},
		{"whole-file", 0, 8192, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			img := append(bytes.Clone(data[:tc.keep]), make([]byte, tc.zeros)...)
			if err := os.WriteFile(seg, img, 0o640); err != nil {
				t.Fatal(err)
			}
			sink := expectEntries(t, dir, recs[:tc.want], tc.name)
			if _, ok := sink.find("WARN", "torn tail"); !ok {
				t.Fatalf("no warning:\n%s", sink.all())
			}
		})
	}
}

// TestGarbledLastEntry flips every byte of the last entry in turn: the only
// bad entry is the last one, so it is dropped as a torn tail.
func TestGarbledLastEntry(t *testing.T) {
	dir := t.TempDir()
	recs := buildJournal(t, dir, 5, randRec(60))
	seg := onlySegment(t, dir)
	data, _ := os.ReadFile(seg)
	fr := frames(t, data)
	last := fr[len(fr)-1]
	for i := last[0]; i < last[1]; i++ {
		img := bytes.Clone(data)
		img[i] ^= 0x41
		if err := os.WriteFile(seg, img, 0o640); err != nil {
			t.Fatal(err)
		}
		expectEntries(t, dir, recs[:4], fmt.Sprintf("flip at %d", i))
	}
}

// TestMidLogCorruption flips every byte of an entry that valid entries follow
// in the last segment: Open refuses with ErrCorrupt naming file, offset and
// salvage; with Salvage it skips that entry (a hole), keeps the ones after
// it and says so loudly.
func TestMidLogCorruption(t *testing.T) {
	dir := t.TempDir()
	recs := buildJournal(t, dir, 5, randRec(40))
	seg := onlySegment(t, dir)
	data, _ := os.ReadFile(seg)
	fr := frames(t, data)
	bad := fr[1] // entry 2 of 5
	for i := bad[0]; i < bad[1]; i++ {
		img := bytes.Clone(data)
		img[i] ^= 0x10
		if err := os.WriteFile(seg, img, 0o640); err != nil {
			t.Fatal(err)
		}
		_, _, err := tryOpen(dir)
		if !isErr(err, ErrCorrupt) {
			t.Fatalf("flip at %d: Open: %v, want ErrCorrupt", i, err)
		}
		for _, s := range []string{filepath.Base(seg), fmt.Sprintf("offset %d", bad[0]), "mid-log", "entry 2", "--salvage"} {
			if !strings.Contains(err.Error(), s) {
				t.Fatalf("flip at %d: error %q does not say %q", i, err, s)
			}
		}
		if i%7 != 0 && i != bad[1]-1 {
			continue // salvage a sample of the positions
		}
		l, sink, err := tryOpen(dir, withSalvage())
		if err != nil {
			t.Fatalf("flip at %d: Open with Salvage: %v", i, err)
		}
		got, err := replayAll(l, 0)
		if err != nil || len(got) != 4 || got[0].rec != recs[0] || got[1].rec != recs[2] || got[3].rec != recs[4] {
			t.Fatalf("flip at %d: salvaged %d records, %v", i, len(got), err)
		}
		if _, ok := sink.find("ERROR", "SALVAGE", "lost_entries=2 "); !ok {
			t.Fatalf("flip at %d: salvage not logged:\n%s", i, sink.all())
		}
		l.Close()
		if err := os.WriteFile(seg, data, 0o640); err != nil {
			t.Fatal(err)
		}
	}
}

// TestOldSegmentCorruption flips every byte of an entry in an old segment:
// Open refuses, naming the entry, and never returns anything but the records
// written; with Salvage (a sample of the positions) every other entry
// replays.
func TestOldSegmentCorruption(t *testing.T) {
	dir := t.TempDir()
	recs := buildJournal(t, dir, 20, randRec(80), withSegment(600))
	files := segmentFiles(t, dir)
	if len(files) < 3 {
		t.Fatalf("want several segments, have %d", len(files))
	}
	seg := files[0]
	data, _ := os.ReadFile(seg)
	fr := frames(t, data)
	if len(fr) < 3 {
		t.Fatalf("first segment holds %d entries", len(fr))
	}
	target := 2 // the second entry (index 2)
	bad := fr[target-1]
	for i := bad[0]; i < bad[1]; i++ {
		img := bytes.Clone(data)
		img[i] ^= 0x04
		if err := os.WriteFile(seg, img, 0o640); err != nil {
			t.Fatal(err)
		}
		_, _, err := tryOpen(dir, withSegment(600))
		if !isErr(err, ErrCorrupt) || !strings.Contains(err.Error(), fmt.Sprintf("entry %d ", target)) {
			t.Fatalf("flip at %d: Open: %v, want ErrCorrupt naming entry %d", i, err, target)
		}
		if i%5 != 0 {
			continue
		}
		func() {
			l, _, err := tryOpen(dir, withSegment(600), withSalvage())
			if err != nil {
				t.Fatalf("flip at %d: Open with Salvage: %v", i, err)
			}
			defer l.Close()
			checkSurvivors(t, l, recs, IndexRange{uint64(target), uint64(target)})
		}()
		if err := os.RemoveAll(filepath.Join(dir, damagedDirName)); err != nil {
			t.Fatal(err)
		}
	}
}

func TestScanSegment(t *testing.T) {
	dir := t.TempDir()
	buildJournal(t, dir, 3, randRec(50))
	data, _ := os.ReadFile(onlySegment(t, dir))
	if r := scanSegment(data, 1); r.bad || r.entries != 3 || r.end != len(data) {
		t.Fatalf("clean segment: %+v", r)
	}
	// The same entries read as if the segment started at 5: index mismatch.
	if r := scanSegment(data, 5); !r.bad || r.entries != 0 || !strings.Contains(r.reason, "index") {
		t.Fatalf("misplaced segment: %+v", r)
	}
	if r := scanSegment(nil, 1); r.bad || r.entries != 0 {
		t.Fatalf("empty segment: %+v", r)
	}
}
