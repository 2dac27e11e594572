package log

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// oldSegmentJournal writes 30 entries over many small segments, with
// snapshots covering the given entries, and returns the records.
func oldSegmentJournal(t *testing.T, dir string, snapsAt ...int) []string {
	t.Helper()
	l, _ := openT(t, dir, withSegment(600))
	var recs []string
	gen := randRec(80)
	for i := 0; i < 30; i++ {
		r := gen(i)
		appendWait(t, l, r)
		recs = append(recs, string(r))
		for _, s := range snapsAt {
			if s == i+1 {
				if err := l.WriteSnapshot(MakePos(uint64(i+1), 0), []byte(fmt.Sprint("state at ", i+1))); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return recs
}

// flipEntry flips a byte in the middle of the entry at index (which must not
// be in the last segment).
func flipEntry(t *testing.T, dir string, index uint64) {
	t.Helper()
	segs, err := listSegments(filepath.Join(dir, walDirName))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(segs)-1; i++ {
		if index < segs[i].start || index >= segs[i+1].start {
			continue
		}
		p := filepath.Join(dir, walDirName, segmentName(segs[i].start))
		data, _ := os.ReadFile(p)
		fr := frames(t, data)[index-segs[i].start]
		data[(fr[0]+fr[1])/2] ^= 0x20
		if err := os.WriteFile(p, data, 0o640); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("entry %d is not in an old segment (segments %v)", index, segs)
}

// TestSalvageOldSegment: an entry in an old segment that recovery must
// replay is damaged. Without Salvage, Open refuses, naming the entry and
// salvage; with Salvage, Open skips that entry (a hole), keeps every
// snapshot and every other entry, says what it lost, and appends go on
// after the last entry.
func TestSalvageOldSegment(t *testing.T) {
	for _, tc := range []struct {
		name     string
		bad      uint64
		snaps    []int
		wantSnap uint64 // entry the newest snapshot covers (0: none)
	}{
		{"after-the-snapshot", 14, []int{5}, 5},
		{"in-the-snapshot-entry", 12, []int{5, 12}, 12},
		{"no-snapshot", 9, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			recs := oldSegmentJournal(t, dir, tc.snaps...)
			flipEntry(t, dir, tc.bad)

			_, _, err := tryOpen(dir, withSegment(600))
			if !isErr(err, ErrCorrupt) || !strings.Contains(err.Error(), fmt.Sprintf("entry %d", tc.bad)) || !strings.Contains(err.Error(), "--salvage") {
				t.Fatalf("Open without salvage: %v", err)
			}

			l, sink := openT(t, dir, withSegment(600), withSalvage())
			if _, ok := sink.find("ERROR", "SALVAGE", fmt.Sprintf("lost_entries=%d ", tc.bad)); !ok {
				t.Fatalf("salvage not logged:\n%s", sink.all())
			}
			spos, _, ok, err := l.LoadSnapshot()
			if err != nil || PosIndex(spos) != tc.wantSnap || ok != (tc.wantSnap != 0) {
				t.Fatalf("snapshot after salvage: entry %d ok=%v %v, want entry %d", PosIndex(spos), ok, err, tc.wantSnap)
			}
			lost := IndexRange{tc.bad, tc.bad}
			checkSurvivors(t, l, recs, lost)
			if p := appendWait(t, l, []byte("next")); PosIndex(p) != 31 {
				t.Fatalf("next append at entry %d, want 31", PosIndex(p))
			}
			l.Close()
			// Opening again (without salvage) finds the same journal.
			l, _ = openT(t, dir, withSegment(600))
			checkSurvivors(t, l, append(recs, "next"), lost)
		})
	}
}

// TestSalvageSkipsDamageBeforeTheSnapshot: damage in an entry the newest
// snapshot covers is found at Open too (a read may reach it: the engine's
// messages stay in the journal), refused, and skipped by a salvage.
func TestSalvageSkipsDamageBeforeTheSnapshot(t *testing.T) {
	dir := t.TempDir()
	recs := oldSegmentJournal(t, dir, 20)
	flipEntry(t, dir, 3)
	if _, _, err := tryOpen(dir, withSegment(600)); !isErr(err, ErrCorrupt) || !strings.Contains(err.Error(), "entry 3") {
		t.Fatalf("Open: %v, want ErrCorrupt naming entry 3", err)
	}
	l, sink := openT(t, dir, withSegment(600), withSalvage())
	if _, ok := sink.find("SALVAGE", "lost_entries=3 "); !ok {
		t.Fatalf("salvage not logged:\n%s", sink.all())
	}
	spos, _, _, _ := l.LoadSnapshot()
	got, err := replayAll(l, spos)
	if err != nil || len(got) != 10 || got[9].rec != recs[29] {
		t.Fatalf("replay after the snapshot: %d records, %v", len(got), err)
	}
	if _, err := l.Read(MakePos(3, 0)); !isErr(err, ErrCorrupt) || !isErr(err, ErrLost) {
		t.Fatalf("Read of the damaged entry: %v, want ErrLost", err)
	}
}

// TestUnsafeAckBeforeWriteHook: the test hook acknowledges records that are
// never written (here the disk is full for good), which is what the crash
// harness must catch. It is loud about it.
func TestUnsafeAckBeforeWriteHook(t *testing.T) {
	t.Setenv(EnvUnsafeAckBeforeWrite, "1")
	l, sink := openT(t, t.TempDir(), withNoSpaceRetry(time.Millisecond))
	if _, ok := sink.find("ERROR", "UNSAFE"); !ok {
		t.Fatalf("the hook is not logged:\n%s", sink.all())
	}
	df := &diskFull{}
	df.install(l)
	df.full.Store(true)
	ch := make(chan error, 1)
	if _, err := l.Append([]byte("never written"), func(err error) { ch <- err }); err != nil {
		t.Fatal(err)
	}
	if err := <-ch; err != nil {
		t.Fatalf("done(%v): the hook should have acknowledged at once", err)
	}
	eventually(t, "the write to fail", func() bool { return df.failures.Load() > 0 })
	if st := l.Stats(); st.Records != 0 {
		t.Fatalf("%d records written", st.Records)
	}
	// Without the variable the log behaves.
	t.Setenv(EnvUnsafeAckBeforeWrite, "")
	l2, sink2 := openT(t, t.TempDir())
	if _, ok := sink2.find("UNSAFE"); ok || l2.unsafeEarlyAck {
		t.Fatal("hook on without the variable")
	}
}

// TestSnapshotAheadOfTheWAL: a snapshot covering entries the WAL lost (its
// tail went in a machine crash under SyncNone) is removed at Open, loudly;
// otherwise the entries written next would get positions below it and the
// next recovery, replaying after it, would skip them.
func TestSnapshotAheadOfTheWAL(t *testing.T) {
	dir := t.TempDir()
	l, _ := openT(t, dir)
	for i := 0; i < 8; i++ {
		appendWait(t, l, []byte(fmt.Sprint("rec-", i)))
	}
	if err := l.WriteSnapshot(MakePos(3, 0), []byte("older")); err != nil {
		t.Fatal(err)
	}
	if err := l.WriteSnapshot(MakePos(8, 0), []byte("newer")); err != nil {
		t.Fatal(err)
	}
	l.Close()
	// The WAL loses its last four entries; the snapshot files survive.
	seg := onlySegment(t, dir)
	data, _ := os.ReadFile(seg)
	fr := frames(t, data)
	if err := os.WriteFile(seg, data[:fr[3][1]], 0o640); err != nil {
		t.Fatal(err)
	}
	l, sink := openT(t, dir)
	if _, ok := sink.find("ERROR", "snapshots cover entries the WAL does not hold", "last_index=4"); !ok {
		t.Fatalf("not reported:\n%s", sink.all())
	}
	pos, data2, ok, err := l.LoadSnapshot()
	if err != nil || !ok || PosIndex(pos) != 3 || string(data2) != "older" {
		t.Fatalf("snapshot after Open: entry %d %q %v %v; want the older one", PosIndex(pos), data2, ok, err)
	}
	if p := appendWait(t, l, []byte("next")); PosIndex(p) != 5 {
		t.Fatalf("next entry %d", PosIndex(p))
	}
	got, err := replayAll(l, pos)
	if err != nil || len(got) != 2 || got[1].rec != "next" {
		t.Fatalf("replay after the snapshot: %v %v", got, err)
	}
}
