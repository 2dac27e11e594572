package engine_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/regentmq/regent/engine"
)

// discardJournal keeps nothing: enough for a measurement where every message
// is consumed and never read back.
type discardJournal struct {
	n     uint64
	queue chan func(error)
}

func newDiscardJournal() *discardJournal {
	j := &discardJournal{queue: make(chan func(error), 1<<16)}
	go func() {
		for done := range j.queue {
			if done != nil {
				done(nil)
			}
		}
	}()
	return j
}

func (j *discardJournal) Append(rec []byte, done func(error)) (uint64, error) {
	j.n++ // appends are serialized per stripe only; the value is unused
	j.queue <- done
	return 0, nil
}
func (j *discardJournal) Read(uint64) ([]byte, error)                     { return nil, fmt.Errorf("discarded") }
func (j *discardJournal) Replay(uint64, func(uint64, []byte) error) error { return nil }
func (j *discardJournal) LoadSnapshot() (uint64, []byte, bool, error)     { return 0, nil, false, nil }
func (j *discardJournal) WriteSnapshot(uint64, []byte) error              { return nil }
func (j *discardJournal) Release(uint64, uint64) error                    { return nil }
func (j *discardJournal) OldestSegment() (uint64, uint64, bool)           { return 0, 0, false }
func (j *discardJournal) Err() error                                      { return nil }
func (j *discardJournal) Stalled(time.Duration) error                     { return nil }

// BenchmarkIdlePartitions measures the heap that idle partitions cost: each
// of 100,000 partitions receives one 128-byte message, which one consumer
// group pops and acks; then the heap is measured after a GC. Run with
//
//	go test -run '^$' -bench IdlePartitions -benchtime 1x ./engine/
func BenchmarkIdlePartitions(b *testing.B) {
	const n = 100_000
	pl := payload128()
	for i := 0; i < b.N; i++ {
		j := newDiscardJournal()
		// The journal keeps nothing, so every message must stay in the
		// cache until it is consumed (20 MB of them here; the default
		// cache is 8 MiB).
		e, err := engine.New(engine.Config{CacheBytes: 256 << 20}, j)
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		// The group exists first, so every partition gets its cursor.
		if _, err := e.Pop(ctx, engine.PopRequest{Queue: "wide", Group: "g"}); err != nil {
			b.Fatal(err)
		}
		before := heapInUse()
		for p := 0; p < n; p++ {
			if _, err := e.Push(ctx, []engine.PushItem{{Queue: "wide", Partition: fmt.Sprintf("partition-%06d", p), Payload: pl}}); err != nil {
				b.Fatal(err)
			}
		}
		consumed := consumeAll(b, e, "wide", "g")
		if consumed != n {
			b.Fatalf("consumed %d of %d", consumed, n)
		}
		after := heapInUse()
		b.ReportMetric(float64(after-before)/n, "bytes/partition")
		runtime.KeepAlive(e)
		e.Close()
		close(j.queue)
	}
}

func heapInUse() int64 {
	var ms runtime.MemStats
	for i := 0; i < 3; i++ {
		runtime.GC()
	}
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

func consumeAll(b *testing.B, e *engine.Engine, q, group string) int {
	ctx := context.Background()
	total := 0
	for {
		msgs, err := e.Pop(ctx, engine.PopRequest{Queue: q, Group: group, Batch: 100, Partitions: 100})
		if err != nil {
			b.Fatal(err)
		}
		if len(msgs) == 0 {
			return total
		}
		acks := make([]engine.AckItem, len(msgs))
		for i, m := range msgs {
			acks[i] = engine.AckItem{PartitionID: m.PartitionID, HasOffset: true, Offset: m.Offset, LeaseID: m.LeaseID, Group: group, Status: engine.Completed}
		}
		if _, err := e.Ack(ctx, acks); err != nil {
			b.Fatal(err)
		}
		total += len(msgs)
	}
}
