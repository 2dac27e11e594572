package log

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
)

// TestConcurrentEverything runs appenders, readers, a replayer and
// retention (TruncateFront) at once, for the race detector and for the
// guarantees: reads return what was written or an error, never other data.
func TestConcurrentEverything(t *testing.T) {
	l, _ := openT(t, t.TempDir(), withSegment(8<<10), withSync(SyncNone))
	var mu sync.Mutex
	written := map[uint64]string{}
	var positions []uint64
	var stop atomic.Bool
	var wg sync.WaitGroup
	var appended atomic.Int64

	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 1500; i++ {
				rec := fmt.Sprintf("w%d-%d-%s", w, i, string(make([]byte, i%200)))
				var pos uint64
				var err error
				ready := make(chan struct{})
				pos, err = l.Append([]byte(rec), func(err error) {
					<-ready
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					written[pos] = rec
					positions = append(positions, pos)
					mu.Unlock()
					appended.Add(1)
				})
				close(ready)
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	readers := sync.WaitGroup{}
	for r := 0; r < 3; r++ {
		readers.Add(1)
		go func() {
			defer readers.Done()
			rng := rand.New(rand.NewPCG(uint64(r), 7))
			for !stop.Load() {
				mu.Lock()
				if len(positions) == 0 {
					mu.Unlock()
					continue
				}
				pos := positions[rng.IntN(len(positions))]
				want := written[pos]
				mu.Unlock()
				got, err := l.Read(pos)
				switch {
				case err == nil && string(got) != want:
					t.Errorf("Read(%d) returned other data", pos)
				case err != nil && !(isErr(err, ErrNotFound) && PosIndex(pos) < l.FirstIndex()):
					t.Errorf("Read(%d): %v (first index %d)", pos, err, l.FirstIndex())
				}
			}
		}()
	}
	readers.Add(1)
	go func() { // replayer
		defer readers.Done()
		for !stop.Load() {
			var last uint64
			err := l.Replay(0, func(pos uint64, rec []byte) error {
				if pos <= last {
					return fmt.Errorf("replay out of order: %d after %d", pos, last)
				}
				last = pos
				return nil
			})
			if err != nil && !isErr(err, ErrNotFound) {
				t.Errorf("Replay: %v", err)
			}
		}
	}()
	readers.Add(1)
	go func() { // retention
		defer readers.Done()
		for !stop.Load() {
			starts := l.SegmentStarts()
			if len(starts) > 4 {
				if err := l.TruncateFront(starts[len(starts)/2]); err != nil {
					t.Errorf("TruncateFront: %v", err)
				}
			}
		}
	}()
	wg.Wait()
	eventually(t, "every done", func() bool { return appended.Load() == 4*1500 })
	stop.Store(true)
	readers.Wait()
	if st := l.Stats(); st.Records != 4*1500 {
		t.Fatalf("stats: %+v", st)
	}
	if len(l.SegmentStarts()) > 8 && l.FirstIndex() == 1 {
		t.Fatal("retention never truncated")
	}
}
