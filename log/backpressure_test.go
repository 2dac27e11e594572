package log

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// stallWrites installs a fault hook that holds every write until release is
// closed, and reports (once) when the committer is held.
func stallWrites(l *Log) (held <-chan struct{}, release func()) {
	h, r := make(chan struct{}), make(chan struct{})
	var once sync.Once
	hook := faultHook(func(index uint64, after bool) error {
		if !after {
			once.Do(func() { close(h) })
			<-r
		}
		return nil
	})
	l.faultFn.Store(&hook)
	return h, sync.OnceFunc(func() { close(r) })
}

// appendWithin calls Append on another goroutine and fails the test if it
// does not return within d: Append must never wait for the committer.
func appendWithin(t *testing.T, l *Log, rec []byte, done func(error), d time.Duration) (uint64, error) {
	t.Helper()
	type res struct {
		pos uint64
		err error
	}
	ch := make(chan res, 1)
	go func() {
		pos, err := l.Append(rec, done)
		ch <- res{pos, err}
	}()
	select {
	case r := <-ch:
		return r.pos, r.err
	case <-time.After(d):
		t.Fatalf("Append waited more than %v while the committer was held", d)
		return 0, nil
	}
}

// TestAppendNeverWaits: with the committer stuck in a write, Append keeps
// answering at once: it seals full groups and queues them, and once
// MaxQueuedBytes wait it refuses with ErrBusy (matching syscall.EAGAIN),
// keeping nothing of the refused record. Stalled reports the stuck
// committer. Once the write goes through, every accepted record is done in
// order, nothing else is in the log, and appends are accepted again.
func TestAppendNeverWaits(t *testing.T) {
	l, _ := openT(t, t.TempDir(), withMaxBatch(1000), func(c *Config) { c.MaxQueuedBytes = 20_000 })
	held, release := stallWrites(l)
	defer release()
	rec := func(i int) []byte { return fmt.Appendf(bytes.Repeat([]byte{'.'}, 90), "%06d", i) } // 97 framed bytes

	var mu sync.Mutex
	var order []int
	var accepted []int
	var poss []uint64
	busy := 0
	for i := 0; busy < 5 && i < 10_000; i++ {
		if i == 1 {
			<-held // the first group is in the committer's hands, stuck
		}
		pos, err := appendWithin(t, l, rec(i), func(err error) {
			if err != nil {
				t.Errorf("done of record %d: %v", i, err)
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
		}, 2*time.Second)
		switch {
		case err == nil:
			accepted = append(accepted, i)
			poss = append(poss, pos)
		case errors.Is(err, ErrBusy) && errors.Is(err, syscall.EAGAIN):
			busy++
		default:
			t.Fatalf("Append %d: %v", i, err)
		}
	}
	if busy == 0 {
		t.Fatal("no ErrBusy with MaxQueuedBytes waiting")
	}
	// 20,000 bytes of 97-byte records: about 206 accepted, over about 21
	// groups of at most 1000 bytes (11 records), most of them sealed.
	if n := len(accepted); n < 150 || n > 210 {
		t.Fatalf("%d records accepted with MaxQueuedBytes 20000", n)
	}
	if err := l.Stalled(10 * time.Millisecond); err == nil {
		eventually(t, "Stalled to report the held committer", func() bool { return l.Stalled(10*time.Millisecond) != nil })
	}
	if st := l.Stats(); st.BusyRefusals != uint64(busy) || st.QueuedBytes == 0 {
		t.Fatalf("stats while held: %+v (busy %d)", st, busy)
	}
	release()
	eventually(t, "every accepted record to be done", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(order) == len(accepted)
	})
	for k := range order {
		if order[k] != accepted[k] {
			t.Fatalf("done order %v..., want %v...", order[:k+1], accepted[:k+1])
		}
	}
	for k := 1; k < len(poss); k++ {
		if poss[k] <= poss[k-1] {
			t.Fatalf("positions not increasing: %d then %d", poss[k-1], poss[k])
		}
	}
	if err := l.Stalled(10 * time.Millisecond); err != nil {
		t.Fatalf("Stalled after the committer caught up: %v", err)
	}
	if st := l.Stats(); st.QueuedBytes != 0 {
		t.Fatalf("%d bytes still queued", st.QueuedBytes)
	}
	appendWait(t, l, rec(-1))
	var got []string
	if err := l.Replay(0, func(_ uint64, r []byte) error { got = append(got, string(r)); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(accepted)+1 {
		t.Fatalf("replay holds %d records, want %d", len(got), len(accepted)+1)
	}
	for k, i := range accepted {
		if got[k] != string(rec(i)) {
			t.Fatalf("record %d is %q, want %q", k, got[k], rec(i))
		}
	}
}

// TestNoDeadlockWhenDoneTakesTheAppendersLock is the shape of the broker's
// old deadlock: appenders hold a lock across Append (as the engine holds a
// partition's stripe), and done callbacks take that same lock (as the engine
// publishes a commit). Append used to wait for room in a full group while
// holding it, and the committer could not finish the group whose callbacks
// wanted it. Now Append never waits; a refused record is tried again after
// the lock is released.
func TestNoDeadlockWhenDoneTakesTheAppendersLock(t *testing.T) {
	for _, pol := range []SyncPolicy{SyncAlways, SyncNone} {
		t.Run(pol.String(), func(t *testing.T) {
			l, _ := openT(t, t.TempDir(), withSync(pol), withMaxBatch(256<<10), withSegment(1<<20),
				func(c *Config) { c.MaxQueuedBytes = 2 << 20 })
			var stripe sync.Mutex
			var wg sync.WaitGroup
			var doneCount, busy int64
			rec := bytes.Repeat([]byte{'x'}, 64<<10)
			const producers, each = 8, 40
			finished := make(chan struct{})
			for p := 0; p < producers; p++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < each; i++ {
						for {
							stripe.Lock()
							_, err := l.Append(rec, func(err error) {
								if err != nil {
									t.Errorf("done: %v", err)
								}
								stripe.Lock()
								doneCount++
								stripe.Unlock()
							})
							if err != nil {
								busy++
							}
							stripe.Unlock()
							if err == nil {
								break
							}
							if !errors.Is(err, ErrBusy) {
								t.Errorf("Append: %v", err)
								return
							}
							time.Sleep(time.Millisecond) // a client's back-off after "overloaded"
						}
					}
				}()
			}
			go func() { wg.Wait(); close(finished) }()
			select {
			case <-finished:
			case <-time.After(30 * time.Second):
				t.Fatal("appenders stuck for 30 s: the journal waits while a done callback wants the appenders' lock")
			}
			eventually(t, "every done", func() bool {
				stripe.Lock()
				defer stripe.Unlock()
				return doneCount == producers*each
			})
			t.Logf("%d records of 64 KiB, %d busy refusals", producers*each, busy)
		})
	}
}

// TestOutOfDescriptorsIsNotSticky: a write that fails for want of file
// descriptors (EMFILE, as when tidwall opens a new segment) is a passing
// condition like a full disk, refused with ErrBusy (so the engine answers
// "overloaded"), not a failure of the journal: once descriptors are back the
// waiting records are written and appends are accepted again.
func TestOutOfDescriptorsIsNotSticky(t *testing.T) {
	l, sink := openT(t, t.TempDir(), withNoSpaceRetry(20*time.Millisecond))
	var short atomic.Bool
	h := faultHook(func(index uint64, after bool) error {
		if short.Load() && !after {
			return &os.PathError{Op: "open", Path: "segment", Err: syscall.EMFILE}
		}
		return nil
	})
	l.faultFn.Store(&h)
	appendWait(t, l, []byte("before"))
	short.Store(true)
	waiting := make(chan error, 1)
	if _, err := l.Append([]byte("caught"), func(err error) { waiting <- err }); err != nil {
		t.Fatal(err)
	}
	eventually(t, "Append to refuse records while descriptors are short", func() bool {
		_, err := l.Append([]byte("refused"), nil)
		return errors.Is(err, ErrBusy) && errors.Is(err, syscall.EAGAIN)
	})
	if err := l.Err(); !errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Err while short of descriptors: %v", err)
	}
	short.Store(false)
	select {
	case err := <-waiting:
		if err != nil {
			t.Fatalf("the record caught in the group: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the record caught in the group was never written")
	}
	appendWait(t, l, []byte("after"))
	if l.Err() != nil {
		t.Fatalf("Err after: %v", l.Err())
	}
	if _, ok := sink.find("WARN", "descriptors are back"); !ok {
		t.Fatalf("recovery not logged:\n%s", sink.all())
	}
	if st := l.Stats(); st.FdShortEvents == 0 {
		t.Fatalf("stats: %+v", st)
	}
}
