package log

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// diskFull is a fault hook that fails writes with ENOSPC while full is set
// (before the write, or after it when after is set: the bytes reach the
// file but the write reports failure).
type diskFull struct {
	full     atomic.Bool
	after    bool
	failures atomic.Int64
}

func (d *diskFull) install(l *Log) {
	h := faultHook(func(index uint64, after bool) error {
		if d.full.Load() && after == d.after {
			d.failures.Add(1)
			return &os.PathError{Op: "write", Path: "segment", Err: syscall.ENOSPC}
		}
		return nil
	})
	l.faultFn.Store(&h)
}

func withNoSpaceRetry(d time.Duration) func(*Config) { return func(c *Config) { c.NoSpaceRetry = d } }

// TestDiskFullIsNotSticky: a write that finds the disk full refuses new
// appends with ErrNoSpace (also matching syscall.ENOSPC), keeps the records
// already accepted (their done waits), retries, and once space is back
// writes them and accepts appends again. After a reopen every record whose
// done returned nil is there once, in order.
func TestDiskFullIsNotSticky(t *testing.T) {
	for _, pol := range []SyncPolicy{SyncAlways, SyncInterval, SyncNone} {
		for _, after := range []bool{false, true} {
			t.Run(fmt.Sprintf("%v/after-write=%v", pol, after), func(t *testing.T) {
				testDiskFull(t, pol, after)
			})
		}
	}
}

func testDiskFull(t *testing.T, pol SyncPolicy, after bool) {
	dir := t.TempDir()
	l, sink := openT(t, dir, withSync(pol), withSegment(4<<10), withNoSpaceRetry(20*time.Millisecond))
	df := &diskFull{after: after}
	df.install(l)
	var want []string
	for i := 0; i < 50; i++ { // several segments' worth before the disk fills
		r := fmt.Sprintf("before-%d-%s", i, strings.Repeat("x", 200))
		appendWait(t, l, []byte(r))
		want = append(want, r)
	}
	df.full.Store(true)
	// These are accepted into groups; their done waits for space.
	var mu sync.Mutex
	doneErr := map[string]error{}
	var pending []string
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		r := fmt.Sprintf("during-%d", i)
		wg.Add(1)
		_, err := l.Append([]byte(r), func(err error) {
			mu.Lock()
			doneErr[r] = err
			mu.Unlock()
			wg.Done()
		})
		if err != nil {
			wg.Done()
			if !errors.Is(err, ErrNoSpace) || !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("Append while the disk is full: %v, want ErrNoSpace", err)
			}
			continue
		}
		pending = append(pending, r)
	}
	eventually(t, "the disk-full state", func() bool { return errors.Is(l.Err(), ErrNoSpace) })
	_, err := l.Append([]byte("refused"), nil)
	if !errors.Is(err, ErrNoSpace) || !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "refused until space is freed") {
		t.Fatalf("Append while the disk is full: %v, want a clear ErrNoSpace", err)
	}
	eventually(t, "a few retries", func() bool { return df.failures.Load() >= 3 })
	mu.Lock()
	if len(doneErr) != 0 {
		t.Fatalf("done ran while the disk was full: %v", doneErr)
	}
	mu.Unlock()
	df.full.Store(false)
	wg.Wait()
	for _, r := range pending {
		if err := doneErr[r]; err != nil {
			t.Fatalf("record %s: done(%v) after space came back", r, err)
		}
		want = append(want, r)
	}
	eventually(t, "appends accepted again", func() bool { return l.Err() == nil })
	for i := 0; i < 30; i++ {
		r := fmt.Sprintf("after-%d-%s", i, strings.Repeat("y", 150))
		appendWait(t, l, []byte(r))
		want = append(want, r)
	}
	if _, ok := sink.find("ERROR", "disk full"); !ok {
		t.Fatalf("disk full not logged:\n%s", sink.all())
	}
	if _, ok := sink.find("WARN", "space is back"); !ok {
		t.Fatalf("recovery not logged:\n%s", sink.all())
	}
	if st := l.Stats(); st.DiskFullEvents != 1 {
		t.Fatalf("DiskFullEvents %d, want 1", st.DiskFullEvents)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2, _ := openT(t, dir, withSegment(4<<10))
	got, err := replayAll(l2, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("reopened with %d records, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i].rec != want[i] {
			t.Fatalf("record %d is %.20q, want %.20q", i, got[i].rec, want[i])
		}
	}
}

// TestCloseWhileDiskFull: closing while the disk is full fails the records
// that could not be written (done gets the error, Close returns it) and
// keeps everything acknowledged before.
func TestCloseWhileDiskFull(t *testing.T) {
	dir := t.TempDir()
	l, _ := openT(t, dir, withNoSpaceRetry(10*time.Millisecond))
	df := &diskFull{after: true}
	df.install(l)
	appendWait(t, l, []byte("kept"))
	df.full.Store(true)
	ch := make(chan error, 1)
	if _, err := l.Append([]byte("lost"), func(err error) { ch <- err }); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a retry", func() bool { return df.failures.Load() >= 2 })
	if err := l.Close(); err == nil {
		t.Fatal("Close while the disk is full returned nil")
	}
	if err := <-ch; err == nil {
		t.Fatal("the unwritten record's done got nil")
	}
	l2, _ := openT(t, dir)
	got, err := replayAll(l2, 0)
	if err != nil || len(got) != 1 || got[0].rec != "kept" {
		t.Fatalf("after reopen: %v %v", got, err)
	}
}

// tmpfsDir mounts a tmpfs of the given size on a temporary directory, or
// skips the test when this process may not mount.
func tmpfsDir(t *testing.T, size int) string {
	t.Helper()
	dir := t.TempDir()
	unmount, err := mountTmpfs(dir, size)
	if err != nil {
		t.Skipf("cannot mount a tmpfs here (%v): the fault-hook tests cover disk full", err)
	}
	t.Cleanup(unmount)
	return dir
}

// TestDiskFullOnTmpfs fills a real (small tmpfs) filesystem: appends are
// refused with ErrNoSpace once it is full, nothing acknowledged is lost, and
// after a ballast file is removed the journal goes on by itself.
func TestDiskFullOnTmpfs(t *testing.T) {
	mnt := tmpfsDir(t, 2<<20)
	ballast := mnt + "/ballast"
	if err := os.WriteFile(ballast, make([]byte, 256<<10), 0o640); err != nil {
		t.Fatal(err)
	}
	dir := mnt + "/journal"
	l, sink := openT(t, dir, withSegment(128<<10), withNoSpaceRetry(20*time.Millisecond))
	rec := func(i int) []byte {
		return fmt.Appendf(nil, "rec-%06d-%s", i, payload(rand.New(rand.NewPCG(uint64(i), 1)), 900, false))
	}
	var acked []string
	var stuck chan error // the done of a record caught by the full disk
	i := 0
	var refused error
	for ; i < 100000 && refused == nil; i++ {
		r := rec(i)
		ch := make(chan error, 1)
		if _, err := l.Append(r, func(err error) { ch <- err }); err != nil {
			refused = err
			break
		}
		acked = append(acked, string(r))
		// Either done comes (a slow fsync only delays it) or the group is
		// caught by the full disk: then it must be written once space
		// returns (checked below).
		var err error
		answered := false
		eventually(t, "done or ErrNoSpace", func() bool {
			select {
			case err = <-ch:
				answered = true
				return true
			default:
				return errors.Is(l.Err(), ErrNoSpace)
			}
		})
		if answered && err != nil {
			t.Fatalf("record %d: done(%v)", i, err)
		}
		if !answered {
			stuck = ch
			_, refused = l.Append([]byte("x"), nil)
		}
	}
	if !errors.Is(refused, ErrNoSpace) {
		t.Fatalf("after %d records: %v, want ErrNoSpace", i, refused)
	}
	t.Logf("disk full after %d records (%d bytes of WAL; a record was caught in a group: %v)", len(acked), l.DiskBytes(), stuck != nil)
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	eventually(t, "appends accepted again", func() bool { return l.Err() == nil })
	if stuck != nil {
		if err := <-stuck; err != nil {
			t.Fatalf("the record caught by the full disk: done(%v)", err)
		}
	}
	for k := 0; k < 20; k++ {
		r := rec(i + 1 + k)
		appendWait(t, l, r)
		acked = append(acked, string(r))
	}
	if _, ok := sink.find("WARN", "space is back"); !ok {
		t.Fatalf("recovery not logged:\n%s", sink.all())
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2, _ := openT(t, dir, withSegment(128<<10))
	got, err := replayAll(l2, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(acked) {
		t.Fatalf("reopened with %d records, want %d", len(got), len(acked))
	}
	for k := range got {
		if got[k].rec != acked[k] {
			t.Fatalf("record %d differs", k)
		}
	}
}
