package log

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// segLayout is where each entry of a journal sits: its segment file and
// its frame in it.
type segLayout struct {
	starts []uint64
	files  []string
	frames [][][2]int // per segment
}

func layoutOf(t *testing.T, dir string) segLayout {
	t.Helper()
	segs, err := listSegments(filepath.Join(dir, walDirName))
	if err != nil {
		t.Fatal(err)
	}
	var lay segLayout
	for _, s := range segs {
		p := filepath.Join(dir, walDirName, segmentName(s.start))
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		lay.starts = append(lay.starts, s.start)
		lay.files = append(lay.files, p)
		lay.frames = append(lay.frames, frames(t, data))
	}
	return lay
}

func rewrite(t *testing.T, path string, f func([]byte) []byte) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, f(data), 0o640); err != nil {
		t.Fatal(err)
	}
}

// damageCase damages an old segment of a journal (segment k of its layout)
// and says which entries that lost and which file the refusal names.
type damageCase struct {
	name   string
	damage func(t *testing.T, lay segLayout) (lost IndexRange, file string)
}

// damageCases are the damages away from the tail, each in an older segment
// (never the last one, whose torn tail is a crash's and repaired).
var damageCases = []damageCase{
	{"segment-missing", func(t *testing.T, lay segLayout) (IndexRange, string) {
		k := 2
		if err := os.Remove(lay.files[k]); err != nil {
			t.Fatal(err)
		}
		return IndexRange{lay.starts[k], lay.starts[k+1] - 1}, filepath.Base(lay.files[k-1])
	}},
	{"flipped", func(t *testing.T, lay segLayout) (IndexRange, string) {
		k := 2
		fr := lay.frames[k][1]
		rewrite(t, lay.files[k], func(b []byte) []byte { b[(fr[0]+fr[1])/2] ^= 0x08; return b })
		return IndexRange{lay.starts[k] + 1, lay.starts[k] + 1}, filepath.Base(lay.files[k])
	}},
	{"zeroed", func(t *testing.T, lay segLayout) (IndexRange, string) {
		k := 1
		a, b := lay.frames[k][0], lay.frames[k][1]
		rewrite(t, lay.files[k], func(d []byte) []byte {
			clear(d[(a[0]+a[1])/2 : (b[0]+b[1])/2]) // from the middle of the first entry to the middle of the second
			return d
		})
		return IndexRange{lay.starts[k], lay.starts[k] + 1}, filepath.Base(lay.files[k])
	}},
	{"truncated", func(t *testing.T, lay segLayout) (IndexRange, string) {
		k := 2
		fr := lay.frames[k][1]
		rewrite(t, lay.files[k], func(b []byte) []byte { return b[:(fr[0]+fr[1])/2] })
		return IndexRange{lay.starts[k] + 1, lay.starts[k+1] - 1}, filepath.Base(lay.files[k])
	}},
}

// TestDamageAwayFromTheTail: each damage of an older segment (missing,
// flipped, zeroed, truncated) makes Open refuse, naming the file, the entry
// and salvage. With Salvage the log opens, holds every other entry, says
// which were lost (Lost, and the log), keeps the damaged original, and
// appends go on; opened again without Salvage it is the same journal, and a
// lost entry reads as ErrLost.
func TestDamageAwayFromTheTail(t *testing.T) {
	for _, tc := range damageCases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			recs := oldSegmentJournal(t, dir)
			lay := layoutOf(t, dir)
			if len(lay.files) < 5 {
				t.Fatalf("want at least 5 segments, have %d", len(lay.files))
			}
			lost, file := tc.damage(t, lay)

			_, _, err := tryOpen(dir, withSegment(600))
			if !isErr(err, ErrCorrupt) {
				t.Fatalf("Open of the damaged journal: %v, want ErrCorrupt", err)
			}
			name := fmt.Sprintf("entry %d", lost.From)
			if lost.From < lost.To {
				name = fmt.Sprintf("entries %s are", lost)
			}
			for _, s := range []string{file, name, "--salvage"} {
				if !strings.Contains(err.Error(), s) {
					t.Fatalf("refusal %q does not name %q", err, s)
				}
			}

			l, sink := openT(t, dir, withSegment(600), withSalvage())
			if _, ok := sink.find("ERROR", "SALVAGE", "lost_entries="+lost.String()); !ok {
				t.Fatalf("salvage of entries %s not logged:\n%s", lost, sink.all())
			}
			if got := l.Lost(); !slices.Equal(got, []IndexRange{lost}) {
				t.Fatalf("Lost() = %v, want [%v]", got, lost)
			}
			if !l.Salvaged() {
				t.Fatal("Salvaged() is false")
			}
			if kept, _ := os.ReadDir(filepath.Join(dir, damagedDirName)); len(kept) != 1 {
				t.Fatalf("damaged original not kept: %v", kept)
			}
			checkSurvivors(t, l, recs, lost)
			if p := appendWait(t, l, []byte("next")); PosIndex(p) != uint64(len(recs)+1) {
				t.Fatalf("next append at entry %d, want %d", PosIndex(p), len(recs)+1)
			}
			l.Close()

			l, sink = openT(t, dir, withSegment(600))
			if _, ok := sink.find("SALVAGE"); ok {
				t.Fatalf("salvaged again:\n%s", sink.all())
			}
			if got := l.Lost(); !slices.Equal(got, []IndexRange{lost}) || !l.Salvaged() {
				t.Fatalf("after reopening: Lost() = %v, Salvaged %v", got, l.Salvaged())
			}
			checkSurvivors(t, l, append(recs, "next"), lost)
		})
	}
}

// checkSurvivors checks that l replays and reads exactly the records of recs
// (record i at entry i+1) but those of the lost entries, which Read and
// Check refuse with ErrLost.
func checkSurvivors(t *testing.T, l *Log, recs []string, lost IndexRange) {
	t.Helper()
	got, err := replayAll(l, 0)
	if err != nil {
		t.Fatalf("Replay: %v", err)
	}
	var want []string
	for i, r := range recs {
		if ix := uint64(i + 1); ix < lost.From || ix > lost.To {
			want = append(want, r)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("replayed %d records, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i].rec != want[i] {
			t.Fatalf("record %d (at entry %d) differs", i, PosIndex(got[i].pos))
		}
	}
	for i, r := range recs {
		pos := MakePos(uint64(i+1), 0)
		b, err := l.Read(pos)
		if ix := uint64(i + 1); ix >= lost.From && ix <= lost.To {
			if !isErr(err, ErrLost) || !isErr(err, ErrCorrupt) || !isErr(l.Check(pos), ErrLost) {
				t.Fatalf("Read of lost entry %d: %v (Check: %v), want ErrLost", ix, err, l.Check(pos))
			}
			continue
		}
		if err != nil || string(b) != r || l.Check(pos) != nil {
			t.Fatalf("Read of entry %d: %v (Check: %v)", i+1, err, l.Check(pos))
		}
	}
}

// TestDamageAfterOpen: an old segment that goes bad while the log is open
// (flipped, zeroed, truncated, removed) is an error for the reads of what it
// held, wrapping ErrCorrupt or ErrNotFound and naming the entry; never a
// panic, never wrong data, and the other entries read as before.
//
// The "after-reads" cases read every entry before the damage (the old
// segments' frames found, their files kept open by Read) and again from
// the files after it; there a file removed while open still reads as it
// was, and Replay is not checked.
func TestDamageAfterOpen(t *testing.T) {
	for _, readFirst := range []bool{false, true} {
		for _, tc := range damageCases {
			name := tc.name
			if readFirst {
				name = "after-reads/" + name
			}
			t.Run(name, func(t *testing.T) {
				dir := t.TempDir()
				recs := oldSegmentJournal(t, dir)
				l, _ := openT(t, dir, withSegment(600))
				lay := layoutOf(t, dir)
				if readFirst {
					if bad := readDamaged(t, l, recs); bad != 0 {
						t.Fatalf("%d entries unread before the damage", bad)
					}
					if l.cache.frames.preads == 0 {
						t.Fatal("no entry was read with a pread")
					}
					l.readMu.Lock()
					for i := range l.cache.slots {
						l.cache.slots[i].valid = false // read from the files, not the decoded entries
					}
					l.readMu.Unlock()
				}
				tc.damage(t, lay)
				bad := readDamaged(t, l, recs)
				if readFirst {
					if tc.name != "segment-missing" && bad == 0 {
						t.Fatal("no read met the damage")
					}
					return
				}
				if bad == 0 {
					t.Fatal("no read met the damage")
				}
				if _, err := replayAll(l, 0); !isErr(err, ErrCorrupt) && !isErr(err, ErrNotFound) {
					t.Fatalf("Replay: %v", err)
				}
			})
		}
	}
}

// readDamaged reads record i+1 of recs from each entry i+1 of l: its data
// or an error wrapping ErrCorrupt or ErrNotFound that names the entry
// (bad counts those), never wrong data.
func readDamaged(t *testing.T, l *Log, recs []string) (bad int) {
	t.Helper()
	for i, r := range recs {
		b, err := l.Read(MakePos(uint64(i+1), 0))
		if err == nil {
			if string(b) != r {
				t.Fatalf("entry %d: wrong data", i+1)
			}
			continue
		}
		bad++
		if (!isErr(err, ErrCorrupt) && !isErr(err, ErrNotFound)) || !strings.Contains(err.Error(), fmt.Sprintf("entry %d", i+1)) {
			t.Fatalf("entry %d: %v", i+1, err)
		}
	}
	return bad
}

// TestEverySnapshotDamaged: both snapshots damaged while the WAL holds every
// entry from 1. LoadSnapshot refuses, naming salvage; with Salvage the
// snapshots are set aside (kept under damaged/), LoadSnapshot says there is
// none, loudly, and the WAL replays whole.
func TestEverySnapshotDamaged(t *testing.T) {
	dir := t.TempDir()
	recs := oldSegmentJournal(t, dir, 10, 20)
	snaps, _ := filepath.Glob(filepath.Join(dir, snapDirName, "*"+snapSuffix))
	if len(snaps) != 2 {
		t.Fatalf("snapshots: %v", snaps)
	}
	for _, s := range snaps {
		rewrite(t, s, func(b []byte) []byte { b[len(b)-2] ^= 1; return b })
	}
	l, _ := openT(t, dir, withSegment(600))
	if _, _, ok, err := l.LoadSnapshot(); ok || !isErr(err, ErrCorrupt) || !strings.Contains(err.Error(), "--salvage") {
		t.Fatalf("LoadSnapshot: ok=%v %v, want ErrCorrupt naming --salvage", ok, err)
	}
	l.Close()

	l, sink := openT(t, dir, withSegment(600), withSalvage())
	if _, _, ok, err := l.LoadSnapshot(); ok || err != nil {
		t.Fatalf("LoadSnapshot with Salvage: ok=%v %v, want none", ok, err)
	}
	if _, ok := sink.find("ERROR", "SALVAGE", "no usable snapshot", "lost_entries=none"); !ok {
		t.Fatalf("not reported:\n%s", sink.all())
	}
	if kept, _ := os.ReadDir(filepath.Join(dir, damagedDirName)); len(kept) != 2 {
		t.Fatalf("damaged snapshots not kept: %v", kept)
	}
	got, err := replayAll(l, 0)
	if err != nil || len(got) != len(recs) {
		t.Fatalf("replay: %d records, %v", len(got), err)
	}
	for i := range got {
		if got[i].rec != recs[i] {
			t.Fatalf("record %d differs", i)
		}
	}
	l.Close()
	l, _ = openT(t, dir, withSegment(600))
	if _, _, ok, err := l.LoadSnapshot(); ok || err != nil {
		t.Fatalf("reopened: ok=%v %v", ok, err)
	}
}

// TestCheckSegment: a clean segment, a misplaced one, an empty one, one
// that is followed by a segment starting too late, and a hole entry.
func TestCheckSegment(t *testing.T) {
	dir := t.TempDir()
	buildJournal(t, dir, 3, randRec(50))
	data, _ := os.ReadFile(onlySegment(t, dir))
	if fr, dm := checkSegment(data, 1, 0); len(fr) != 3 || len(dm) != 0 {
		t.Fatalf("clean segment: %v %v", fr, dm)
	}
	if fr, dm := checkSegment(data, 1, 4); len(fr) != 3 || len(dm) != 0 {
		t.Fatalf("clean segment with its successor: %v %v", fr, dm)
	}
	if _, dm := checkSegment(data, 1, 6); len(dm) != 1 || dm[0].lost != (IndexRange{4, 5}) || dm[0].bytes != 0 {
		t.Fatalf("segment followed by a gap: %+v", dm)
	}
	if fr, dm := checkSegment(data, 5, 0); len(fr) != 0 || len(dm) != 1 || !strings.Contains(dm[0].reason, "index") {
		t.Fatalf("misplaced segment: %v %+v", fr, dm)
	}
	if fr, dm := checkSegment(nil, 1, 0); len(fr) != 0 || len(dm) != 0 {
		t.Fatalf("empty segment: %v %v", fr, dm)
	}
	hole := holeFrame(4)
	fr, dm := checkSegment(append(bytes.Clone(data), hole...), 1, 0)
	if len(fr) != 4 || !fr[3].hole || len(dm) != 0 {
		t.Fatalf("with a hole: %v %v", fr, dm)
	}
	var d decoded
	if err := decodeEntry(&d, hole[1:], 4, 1<<20); !isErr(err, ErrLost) || !isErr(err, ErrCorrupt) {
		t.Fatalf("decoding a hole: %v", err)
	}
}
