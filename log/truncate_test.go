package log

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// checkSegments compares SegmentStarts and DiskBytes with the directory.
func checkSegments(t *testing.T, l *Log) {
	t.Helper()
	files := segmentFiles(t, l.dir)
	var starts []uint64
	var size int64
	for _, f := range files {
		s, _ := segmentIndex(filepath.Base(f))
		starts = append(starts, s)
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		size += fi.Size()
	}
	if got := l.SegmentStarts(); !slices.Equal(got, starts) {
		t.Fatalf("SegmentStarts %v, directory has %v", got, starts)
	}
	if got := l.DiskBytes(); got != size {
		t.Fatalf("DiskBytes %d, files hold %d", got, size)
	}
}

func TestTruncateFront(t *testing.T) {
	dir := t.TempDir()
	seg := withSegment(1000)
	l, _ := openT(t, dir, seg)
	rec := randRec(200)
	var want []posRec
	for i := 0; i < 40; i++ {
		r := rec(i)
		want = append(want, posRec{appendWait(t, l, r), string(r)})
	}
	checkSegments(t, l)
	starts := l.SegmentStarts()
	if len(starts) < 5 {
		t.Fatalf("want several segments, have %v", starts)
	}

	// Mid-segment and out-of-range indexes are refused.
	for _, idx := range []uint64{starts[1] + 1, starts[len(starts)-1] + 100, 0} {
		if err := l.TruncateFront(idx); !isErr(err, ErrBadIndex) {
			t.Fatalf("TruncateFront(%d): %v, want ErrBadIndex", idx, err)
		}
	}
	if err := l.TruncateFront(starts[0]); err != nil {
		t.Fatalf("no-op truncate: %v", err)
	}

	before := l.DiskBytes()
	cut := starts[2]
	if err := l.TruncateFront(cut); err != nil {
		t.Fatal(err)
	}
	checkSegments(t, l)
	if l.DiskBytes() >= before {
		t.Fatalf("DiskBytes %d did not fall below %d", l.DiskBytes(), before)
	}
	if l.FirstIndex() != cut || l.SegmentStarts()[0] != cut {
		t.Fatalf("FirstIndex %d, starts %v after truncating to %d", l.FirstIndex(), l.SegmentStarts(), cut)
	}
	if _, err := l.Read(MakePos(cut-1, 0)); !isErr(err, ErrNotFound) {
		t.Fatalf("Read of a truncated entry: %v", err)
	}
	got, err := replayAll(l, 0)
	if err != nil || fmt.Sprint(got) != fmt.Sprint(want[cut-1:]) {
		t.Fatalf("replay after truncation: %d records, %v", len(got), err)
	}
	if _, err := replayAll(l, MakePos(cut-2, 0)); !isErr(err, ErrNotFound) {
		t.Fatalf("replay from a truncated position: %v", err)
	}
	// Appends go on; reopening keeps it all.
	r := []byte("after truncate")
	want = append(want, posRec{appendWait(t, l, r), string(r)})
	l.Close()
	l, _ = openT(t, dir, seg)
	checkSegments(t, l)
	if got, err := replayAll(l, 0); err != nil || fmt.Sprint(got) != fmt.Sprint(want[cut-1:]) {
		t.Fatalf("after reopen: %d records, %v", len(got), err)
	}
}

// TestTruncateEverything drops every entry (tidwall's own TruncateFront
// refuses): the tail segment is empty after a roll-over and truncating to its
// start leaves an empty log that keeps its indexes.
func TestTruncateEverything(t *testing.T) {
	dir := t.TempDir()
	seg := withSegment(500)
	l, _ := openT(t, dir, seg)
	rec := randRec(600) // every entry fills a segment, so the tail is empty
	for i := 0; i < 3; i++ {
		appendWait(t, l, rec(i))
	}
	starts := l.SegmentStarts()
	lastStart := starts[len(starts)-1]
	if lastStart != l.LastIndex()+1 {
		t.Fatalf("tail segment starts at %d, last index %d", lastStart, l.LastIndex())
	}
	if err := l.TruncateFront(lastStart); err != nil {
		t.Fatal(err)
	}
	checkSegments(t, l)
	if l.FirstIndex() != 4 || l.LastIndex() != 3 {
		t.Fatalf("empty log: first %d last %d", l.FirstIndex(), l.LastIndex())
	}
	if got, err := replayAll(l, 0); err != nil || len(got) != 0 {
		t.Fatalf("replay of an empty log: %v %v", got, err)
	}
	p := appendWait(t, l, []byte("fresh"))
	if PosIndex(p) != 4 {
		t.Fatalf("append after emptying at index %d", PosIndex(p))
	}
	l.Close()
	l, _ = openT(t, dir, seg)
	if got, err := replayAll(l, 0); err != nil || len(got) != 1 || got[0].rec != "fresh" || got[0].pos != p {
		t.Fatalf("after reopen: %v %v", got, err)
	}
}

// TestSyncPolicies: each policy delivers done; fsyncs happen when the policy
// says.
func TestSyncPolicies(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*Config)
	}{
		{"always", withSync(SyncAlways)},
		{"interval", withInterval(2 * time.Millisecond)},
		{"none", withSync(SyncNone)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, _ := openT(t, t.TempDir(), tc.mod)
			for i := 0; i < 20; i++ {
				appendWait(t, l, []byte("record"))
			}
			st := l.Stats()
			switch tc.name {
			case "always":
				if st.Fsyncs < st.Entries || st.Entries == 0 {
					t.Fatalf("always: %d fsyncs for %d entries", st.Fsyncs, st.Entries)
				}
			case "interval":
				// The first write fsyncs at once; the ones after it within the
				// interval are fsynced when the timer fires. After that,
				// nothing new is written, so the count must settle: a ticker
				// that fsyncs with nothing written never lets it (10 s).
				eventually(t, "interval fsyncs to stop once nothing is written", func() bool {
					n := l.Stats().Fsyncs
					time.Sleep(20 * time.Millisecond) // ten intervals
					return n > 0 && l.Stats().Fsyncs == n
				})
			case "none":
				if st.Fsyncs != 0 {
					t.Fatalf("none: %d fsyncs before Close", st.Fsyncs)
				}
			}
			var hist uint64
			for _, c := range l.Stats().FsyncHistogram {
				hist += c
			}
			if hist != l.Stats().Fsyncs {
				t.Fatalf("histogram counts %d of %d fsyncs", hist, l.Stats().Fsyncs)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			if l.Stats().Fsyncs == 0 {
				t.Fatal("Close did not fsync")
			}
		})
	}
}

// TestSegmentMirror: the segment list the committer mirrors from tidwall's
// rules matches the files, also when the tail is already above a lowered
// SegmentBytes at open (tidwall then rolls before the next write).
func TestSegmentMirror(t *testing.T) {
	dir := t.TempDir()
	rec := randRec(300)
	buildJournal(t, dir, 10, rec, withSegment(1<<20))
	for _, size := range []int{2000, 700, 1} {
		l, _ := openT(t, dir, withSegment(size))
		checkSegments(t, l)
		for i := 0; i < 7; i++ {
			appendWait(t, l, rec(i))
			checkSegments(t, l)
		}
		l.Close()
	}
}

// TestRecordsPerEntryCap: a group is sealed when it holds the most records a
// position can number.
func TestRecordsPerEntryCap(t *testing.T) {
	l, _ := openT(t, t.TempDir(), withSync(SyncNone))
	l.mu.Lock()
	l.maxRecords = 10
	l.mu.Unlock()
	var last uint64
	for i := 0; i < 200; i++ {
		p, err := l.Append([]byte("r"), nil)
		if err != nil {
			t.Fatal(err)
		}
		if PosRecord(p) >= 10 || p <= last {
			t.Fatalf("position %d (record %d) after %d", p, PosRecord(p), last)
		}
		last = p
	}
	l.Close()
	if st := l.Stats(); st.Entries < 20 || st.Records != 200 {
		t.Fatalf("%d entries for 200 records capped at 10", st.Entries)
	}
}

// TestReleaseKeepsWhatItsReaderNeeds: Release drops the whole segments
// before the first entry that must stay (the one after the entry holding
// covered, or the one holding live if that is older), never a segment
// holding one of them; OldestSegment gives the first segment's positions.
func TestReleaseKeepsWhatItsReaderNeeds(t *testing.T) {
	dir := t.TempDir()
	rec := randRec(300)
	buildJournal(t, dir, 12, rec, withSegment(700))
	l, _ := openT(t, dir, withSegment(700))
	starts := l.SegmentStarts()
	if len(starts) < 5 {
		t.Fatalf("want at least 5 segments, have %v", starts)
	}
	from, to, ok := l.OldestSegment()
	if !ok || from != MakePos(starts[0], 0) || to != MakePos(starts[1], 0) {
		t.Fatalf("OldestSegment: %d, %d, %v; segments start at %v", from, to, ok, starts)
	}
	release := func(covered, live Pos, wantFirst uint64) {
		t.Helper()
		if err := l.Release(covered, live); err != nil {
			t.Fatal(err)
		}
		if got := l.SegmentStarts()[0]; got != wantFirst {
			t.Fatalf("Release(%d, %d): first segment starts at %d, want %d", covered, live, got, wantFirst)
		}
	}
	release(0, 0, starts[0])                                         // nothing covered: everything stays
	release(0, MakePos(starts[2], 0), starts[0])                     // live alone keeps everything too
	release(MakePos(starts[1]-1, 3), 0, starts[1])                   // the entry after covered's opens segment 1
	release(MakePos(starts[3], 0), MakePos(starts[2], 1), starts[2]) // live is older: its segment stays
	release(MakePos(starts[4]-1, 0), 0, starts[4])
	if first, err := l.CheckFront(); err == nil || first != starts[4] {
		t.Fatalf("CheckFront after dropping the front: %d, %v", first, err)
	}
}

// TestCheckFrontOfAWholeLog: a log that starts at entry 1 has its front.
func TestCheckFrontOfAWholeLog(t *testing.T) {
	dir := t.TempDir()
	buildJournal(t, dir, 3, randRec(100))
	l, _ := openT(t, dir)
	if first, err := l.CheckFront(); err != nil || first != 0 {
		t.Fatalf("CheckFront: %d, %v", first, err)
	}
}
