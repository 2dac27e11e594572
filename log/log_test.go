package log

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// journal is the engine's view of the log (engine.Journal, restated here:
// log must not import engine). It uses only builtin types.
type journal interface {
	Append(rec []byte, done func(error)) (uint64, error)
	Read(pos uint64) ([]byte, error)
	Replay(after uint64, fn func(pos uint64, rec []byte) error) error
	LoadSnapshot() (pos uint64, data []byte, ok bool, err error)
	WriteSnapshot(pos uint64, data []byte) error
	SegmentStarts() []uint64
	TruncateFront(index uint64) error
	Err() error
	Stalled(after time.Duration) error
}

var _ journal = (*Log)(nil)

func TestPos(t *testing.T) {
	for _, tc := range []struct {
		index uint64
		rec   int
	}{{1, 0}, {1, 1}, {7, 12345}, {1 << 40, maxRecordsPerEntry}} {
		p := MakePos(tc.index, tc.rec)
		if PosIndex(p) != tc.index || PosRecord(p) != tc.rec {
			t.Errorf("MakePos(%d,%d)=%d -> (%d,%d)", tc.index, tc.rec, p, PosIndex(p), PosRecord(p))
		}
	}
	if MakePos(1, 5) >= MakePos(2, 0) {
		t.Error("positions must increase with the index")
	}
}

func TestParseSync(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    SyncPolicy
		every   time.Duration
		wantErr bool
	}{
		{"always", SyncAlways, 0, false},
		{"ALWAYS", SyncAlways, 0, false},
		{"none", SyncNone, 0, false},
		{"interval", SyncInterval, 10 * time.Millisecond, false},
		{"interval:25ms", SyncInterval, 25 * time.Millisecond, false},
		{"interval:1s", SyncInterval, time.Second, false},
		{"interval:", 0, 0, true},
		{"interval:0s", 0, 0, true},
		{"interval:-1ms", 0, 0, true},
		{"interval:fast", 0, 0, true},
		{"sometimes", 0, 0, true},
		{"", 0, 0, true},
	} {
		p, d, err := ParseSync(tc.in)
		if (err != nil) != tc.wantErr || p != tc.want || d != tc.every {
			t.Errorf("ParseSync(%q) = %v, %v, %v", tc.in, p, d, err)
		}
		if err == nil && !strings.HasPrefix(tc.in, "interval:") && !strings.EqualFold(p.String(), tc.in) {
			t.Errorf("%v.String() = %q", p, p.String())
		}
	}
	if s := SyncPolicy(9).String(); s != "SyncPolicy(9)" {
		t.Errorf("String of unknown policy: %q", s)
	}
}

func TestConfigValidation(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"defaults", Config{Dir: "x"}, true},
		{"no dir", Config{}, false},
		{"bad policy", Config{Dir: "x", Sync: 7}, false},
		{"negative interval", Config{Dir: "x", Sync: SyncInterval, SyncInterval: -1}, false},
		{"negative segment", Config{Dir: "x", SegmentBytes: -1}, false},
		{"batch above entry", Config{Dir: "x", MaxBatchBytes: 2 << 20, MaxEntryBytes: 1 << 20}, false},
		{"entry above limit", Config{Dir: "x", MaxEntryBytes: MaxEntryBytesLimit + 1}, false},
		{"small entry cap shrinks default batch", Config{Dir: "x", MaxEntryBytes: 1 << 20}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := tc.cfg.withDefaults()
			if (err == nil) != tc.ok {
				t.Fatalf("err = %v, want ok=%v", err, tc.ok)
			}
			if err != nil {
				return
			}
			if c.SegmentBytes <= 0 || c.MaxBatchBytes <= 0 || c.MaxBatchBytes > c.MaxEntryBytes || c.Logger == nil {
				t.Fatalf("defaults not filled: %+v", c)
			}
		})
	}
	c, _ := Config{Dir: "x", Sync: SyncInterval}.withDefaults()
	if c.SyncInterval != DefaultSyncInterval {
		t.Errorf("default interval %v", c.SyncInterval)
	}
}

// TestRoundTrip appends records in many groups, reads each back, replays,
// and does it again after reopening.
func TestRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		text bool
		size int
		mods []func(*Config)
	}{
		{"always/text", true, 300, nil},
		{"always/random", false, 300, nil},
		{"none/text/small-segments", true, 1000, []func(*Config){withSync(SyncNone), withSegment(16 << 10)}},
		{"interval/empty-and-tiny", true, 3, []func(*Config){withInterval(time.Millisecond)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			l, _ := openT(t, dir, tc.mods...)
			r := rand.New(rand.NewPCG(1, 2))
			var want []posRec
			var mu sync.Mutex
			var wg sync.WaitGroup
			for g := 0; g < 40; g++ {
				// A burst of appends without waiting, then wait: several
				// records per group, several groups.
				for i := 0; i < 1+r.IntN(30); i++ {
					rec := payload(r, r.IntN(tc.size+1), tc.text)
					wg.Add(1)
					pos, err := l.Append(rec, func(err error) {
						if err != nil {
							t.Errorf("done: %v", err)
						}
						wg.Done()
					})
					if err != nil {
						t.Fatal(err)
					}
					mu.Lock()
					want = append(want, posRec{pos, string(rec)})
					mu.Unlock()
				}
				wg.Wait()
			}
			check := func(l *Log) {
				t.Helper()
				for i := 1; i < len(want); i++ {
					if want[i].pos <= want[i-1].pos {
						t.Fatalf("positions not increasing: %d then %d", want[i-1].pos, want[i].pos)
					}
				}
				for _, w := range want {
					got, err := l.Read(w.pos)
					if err != nil || string(got) != w.rec {
						t.Fatalf("Read(%d) = %d bytes, %v; want %d bytes", w.pos, len(got), err, len(w.rec))
					}
				}
				got, err := replayAll(l, 0)
				if err != nil {
					t.Fatal(err)
				}
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("replay differs: %d records, want %d", len(got), len(want))
				}
				mid := want[len(want)/2].pos
				got, err = replayAll(l, mid)
				if err != nil || fmt.Sprint(got) != fmt.Sprint(want[len(want)/2+1:]) {
					t.Fatalf("replay after %d: %d records, %v", mid, len(got), err)
				}
				if l.LastIndex() != PosIndex(want[len(want)-1].pos) || l.FirstIndex() != 1 {
					t.Fatalf("indexes %d..%d", l.FirstIndex(), l.LastIndex())
				}
			}
			check(l)
			st := l.Stats()
			if st.Records != uint64(len(want)) || st.Appends != st.Records || st.Entries != l.LastIndex() || st.Entries < 40 {
				t.Fatalf("stats %+v for %d records", st, len(want))
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			l2, _ := openT(t, dir, tc.mods...)
			check(l2)
			// Appends continue after the last index.
			p := appendWait(t, l2, []byte("after reopen"))
			if PosIndex(p) != PosIndex(want[len(want)-1].pos)+1 || PosRecord(p) != 0 {
				t.Fatalf("position after reopen %d", p)
			}
		})
	}
}

// TestConcurrentAppenders: every record exactly once, each goroutine's order
// kept, done exactly once per record, positions match the replay.
func TestConcurrentAppenders(t *testing.T) {
	const writers, per = 8, 400
	for _, p := range []SyncPolicy{SyncAlways, SyncNone} {
		t.Run(p.String(), func(t *testing.T) {
			dir := t.TempDir()
			l, _ := openT(t, dir, withSync(p), withSegment(64<<10))
			var dones [writers][per]atomic.Int32
			positions := make([][per]uint64, writers)
			var wg sync.WaitGroup
			for w := 0; w < writers; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < per; i++ {
						rec := fmt.Appendf(nil, "w%d-%d-%s", w, i, bytes.Repeat([]byte{'x'}, i%50))
						pos, err := l.Append(rec, func(err error) {
							if err != nil {
								t.Errorf("done: %v", err)
							}
							dones[w][i].Add(1)
						})
						if err != nil {
							t.Error(err)
							return
						}
						positions[w][i] = pos
					}
				}()
			}
			wg.Wait()
			if err := l.Close(); err != nil { // Close writes the last group
				t.Fatal(err)
			}
			for w := range dones {
				for i := range dones[w] {
					if n := dones[w][i].Load(); n != 1 {
						t.Fatalf("done of w%d-%d called %d times", w, i, n)
					}
				}
			}
			l2, _ := openT(t, dir)
			next := make([]int, writers)
			n := 0
			err := l2.Replay(0, func(pos uint64, rec []byte) error {
				var w, i int
				if _, err := fmt.Sscanf(string(rec), "w%d-%d-", &w, &i); err != nil {
					return fmt.Errorf("bad record %q", rec)
				}
				if i != next[w] {
					return fmt.Errorf("writer %d: record %d, want %d", w, i, next[w])
				}
				if positions[w][i] != pos {
					return fmt.Errorf("w%d-%d at %d, Append said %d", w, i, pos, positions[w][i])
				}
				next[w]++
				n++
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if n != writers*per {
				t.Fatalf("replayed %d records, want %d", n, writers*per)
			}
			if st := l.Stats(); st.Entries >= writers*per {
				t.Logf("no batching happened: %d entries for %d records", st.Entries, n)
			}
		})
	}
}

func TestCloseAndAfterClose(t *testing.T) {
	dir := t.TempDir()
	l, _ := openT(t, dir, withSync(SyncNone))
	var called atomic.Int32
	for i := 0; i < 1000; i++ {
		if _, err := l.Append([]byte("pending"), func(err error) {
			if err != nil {
				t.Error(err)
			}
			called.Add(1)
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if called.Load() != 1000 {
		t.Fatalf("%d dones after Close, want 1000", called.Load())
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := l.Append([]byte("late"), nil); !isErr(err, ErrClosed) {
		t.Fatalf("Append after Close: %v", err)
	}
	if _, err := l.Read(MakePos(1, 0)); !isErr(err, ErrClosed) {
		t.Fatalf("Read after Close: %v", err)
	}
	if err := l.Replay(0, func(uint64, []byte) error { return nil }); !isErr(err, ErrClosed) {
		t.Fatalf("Replay after Close: %v", err)
	}
	if err := l.WriteSnapshot(1, []byte("x")); !isErr(err, ErrClosed) {
		t.Fatalf("WriteSnapshot after Close: %v", err)
	}
	l2, _ := openT(t, dir)
	got, err := replayAll(l2, 0)
	if err != nil || len(got) != 1000 {
		t.Fatalf("after reopen: %d records, %v", len(got), err)
	}
}

func TestReadErrors(t *testing.T) {
	l, _ := openT(t, t.TempDir())
	p := appendWait(t, l, []byte("one"))
	for _, pos := range []uint64{0, MakePos(PosIndex(p), 1), MakePos(PosIndex(p)+1, 0)} {
		if _, err := l.Read(pos); !isErr(err, ErrNotFound) {
			t.Errorf("Read(%d): %v, want ErrNotFound", pos, err)
		}
	}
	stop := fmt.Errorf("stop")
	if err := l.Replay(0, func(uint64, []byte) error { return stop }); err != stop {
		t.Errorf("Replay returns fn's error: %v", err)
	}
	if _, err := l.Append(make([]byte, DefaultMaxEntryBytes), nil); !isErr(err, ErrTooLarge) {
		t.Errorf("huge record: %v", err)
	}
}

// TestMaxBatchBytes: a full group is sealed and the next record opens a new
// one, so entries stay near MaxBatchBytes.
func TestMaxBatchBytes(t *testing.T) {
	l, _ := openT(t, t.TempDir(), withMaxBatch(1000), withSync(SyncNone))
	rec := bytes.Repeat([]byte("r"), 98) // 99 framed bytes
	for i := 0; i < 500; i++ {
		if _, err := l.Append(rec, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	st := l.Stats()
	if st.Records != 500 || st.BytesRaw != 500*99 {
		t.Fatalf("stats %+v", st)
	}
	// Each entry holds at most ceil(1000/99) = 11 records.
	if st.Entries < 500/11 {
		t.Fatalf("%d entries for 500 records of 99 bytes with MaxBatchBytes 1000", st.Entries)
	}
}

// TestFailureIsSticky: after a write fails every Append returns the error and
// the records of the failed group get it in done.
func TestFailureIsSticky(t *testing.T) {
	l, sink := openT(t, t.TempDir())
	appendWait(t, l, []byte("fine"))
	// Test hook: close tidwall/wal under the committer so the next write fails.
	l.wmu.Lock()
	if err := l.wal.Close(); err != nil {
		t.Fatal(err)
	}
	l.wmu.Unlock()
	ch := make(chan error, 1)
	if _, err := l.Append([]byte("doomed"), func(err error) { ch <- err }); err != nil {
		t.Fatal(err)
	}
	if err := <-ch; err == nil {
		t.Fatal("done got nil for a failed write")
	}
	if l.Err() == nil {
		t.Fatal("Err() is nil after a failed write")
	}
	if _, err := l.Append([]byte("later"), nil); err == nil || err.Error() != l.Err().Error() {
		t.Fatalf("Append after failure: %v, want %v", err, l.Err())
	}
	if _, ok := sink.find("ERROR", "journal failed"); !ok {
		t.Fatalf("failure not logged:\n%s", sink.all())
	}
	if err := l.Close(); err == nil {
		t.Fatal("Close of a failed log returned nil")
	}
	// The lock was released anyway.
	l2, _ := openT(t, l.dir)
	if got, err := replayAll(l2, 0); err != nil || len(got) != 1 {
		t.Fatalf("after failure: %v %v", got, err)
	}
}

func TestNextIndex(t *testing.T) {
	l, _ := openT(t, t.TempDir())
	if l.NextIndex() != 1 || l.LastIndex() != 0 || l.FirstIndex() != 1 {
		t.Fatalf("fresh log: next %d last %d first %d", l.NextIndex(), l.LastIndex(), l.FirstIndex())
	}
	p := appendWait(t, l, []byte("a"))
	if PosIndex(p) != 1 || l.LastIndex() != 1 || l.NextIndex() != 2 {
		t.Fatalf("after one: pos %d last %d next %d", p, l.LastIndex(), l.NextIndex())
	}
}
