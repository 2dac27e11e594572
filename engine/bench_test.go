package engine_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/regentmq/regent/engine"
	"github.com/regentmq/regent/log"
)

// Benchmarks of the engine over the real journal. Load figures belong to the
// harness; these measure the engine's own cost. Run with
//
//	go test -run '^$' -bench . -benchtime 3s ./engine/
func openBench(b *testing.B, pol log.SyncPolicy) *engine.Engine {
	b.Helper()
	j, err := log.Open(log.Config{Dir: b.TempDir(), Sync: pol})
	if err != nil {
		b.Fatal(err)
	}
	e, err := engine.New(engine.Config{}, j)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		e.Close()
		j.Close()
	})
	return e
}

func payload128() []byte {
	p := make([]byte, 128)
	copy(p, `{"order":12345,"customer":"c-42","amount":99.95,"currency":"EUR","items":[1,2,3],"note":"`)
	for i := 90; i < 126; i++ {
		p[i] = 'a' + byte(i%26)
	}
	copy(p[126:], `"}`)
	return p
}

// BenchmarkPush: producers push batches of 128-byte messages to one queue
// (16 partitions) and wait for each batch to be durable.
func BenchmarkPush(b *testing.B) {
	for _, pol := range []log.SyncPolicy{log.SyncAlways, log.SyncNone} {
		for _, batch := range []int{1, 100, 1000} {
			b.Run(fmt.Sprintf("size=128/batch=%d/sync=%s", batch, pol), func(b *testing.B) {
				benchPush(b, pol, batch, 16, 16)
			})
		}
	}
}

func benchPush(b *testing.B, pol log.SyncPolicy, batch, producers, partitions int) {
	e := openBench(b, pol)
	pl := payload128()
	var next atomic.Int64
	total := int64(b.N) * int64(batch)
	b.SetBytes(int64(128 * batch))
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < producers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			items := make([]engine.PushItem, batch)
			for i := range items {
				items[i] = engine.PushItem{Queue: "bench", Partition: fmt.Sprint("p", w%partitions), Payload: pl}
			}
			for next.Add(int64(batch)) <= total {
				if _, err := e.Push(context.Background(), items); err != nil {
					b.Error(err)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	el := time.Since(start)
	b.ReportMetric(float64(total)/el.Seconds(), "msgs/s")
}

// BenchmarkPopAck: consumers pop batches of 100 from a pre-filled queue and
// ack them completed (sync always).
func BenchmarkPopAck(b *testing.B) {
	for _, batch := range []int{1, 100} {
		b.Run(fmt.Sprintf("size=128/batch=%d", batch), func(b *testing.B) {
			e := openBench(b, log.SyncAlways)
			total := b.N * batch
			fill(b, e, "bench", 16, total)
			b.SetBytes(int64(128 * batch))
			b.ResetTimer()
			start := time.Now()
			consumed := consume(b, e, "bench", "", 4, batch, total)
			b.ReportMetric(float64(consumed)/time.Since(start).Seconds(), "msgs/s")
		})
	}
}

// BenchmarkFanout: 10 groups each read every message of a pre-filled queue.
func BenchmarkFanout(b *testing.B) {
	b.Run("groups=10/batch=100", func(b *testing.B) {
		e := openBench(b, log.SyncAlways)
		const groups = 10
		per := b.N * 100 / groups
		if per < 100 {
			per = 100
		}
		fill(b, e, "fan", 16, per)
		b.ResetTimer()
		start := time.Now()
		var wg sync.WaitGroup
		var n atomic.Int64
		for g := 0; g < groups; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				n.Add(int64(consume(b, e, "fan", fmt.Sprint("g", g), 1, 100, per)))
			}(g)
		}
		wg.Wait()
		b.ReportMetric(float64(n.Load())/time.Since(start).Seconds(), "msgs/s")
	})
}

// BenchmarkPartitions: pushes spread over 100,000 partitions, each push one
// batch of 10 messages to one partition.
func BenchmarkPartitions(b *testing.B) {
	b.Run("partitions=100000/batch=10", func(b *testing.B) {
		e := openBench(b, log.SyncAlways)
		pl := payload128()
		var next atomic.Int64
		total := int64(b.N) * 10
		b.ResetTimer()
		start := time.Now()
		var wg sync.WaitGroup
		for w := 0; w < 16; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				items := make([]engine.PushItem, 10)
				for {
					k := next.Add(10)
					if k > total {
						return
					}
					part := fmt.Sprint("p", (k/10)%100000)
					for i := range items {
						items[i] = engine.PushItem{Queue: "wide", Partition: part, Payload: pl}
					}
					if _, err := e.Push(context.Background(), items); err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		b.ReportMetric(float64(total)/time.Since(start).Seconds(), "msgs/s")
	})
}

func fill(b *testing.B, e *engine.Engine, q string, partitions, n int) {
	b.Helper()
	pl := payload128()
	for p := 0; p < partitions; p++ {
		left := n / partitions
		if p < n%partitions {
			left++
		}
		for left > 0 {
			k := min(left, 1000)
			items := make([]engine.PushItem, k)
			for i := range items {
				items[i] = engine.PushItem{Queue: q, Partition: fmt.Sprint("p", p), Payload: pl}
			}
			if _, err := e.Push(context.Background(), items); err != nil {
				b.Fatal(err)
			}
			left -= k
		}
	}
}

// consume pops and acks until total messages were consumed by group.
func consume(b *testing.B, e *engine.Engine, q, group string, consumers, batch, total int) int {
	var got atomic.Int64
	var wg sync.WaitGroup
	for c := 0; c < consumers; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			acks := make([]engine.AckItem, 0, batch)
			for got.Load() < int64(total) {
				msgs, err := e.Pop(context.Background(), engine.PopRequest{Queue: q, Group: group, Batch: batch})
				if err != nil {
					b.Error(err)
					return
				}
				if len(msgs) == 0 {
					runtime.Gosched()
					continue
				}
				acks = acks[:0]
				for _, m := range msgs {
					acks = append(acks, engine.AckItem{PartitionID: m.PartitionID, HasOffset: true, Offset: m.Offset, LeaseID: m.LeaseID, Group: m.Group, Status: engine.Completed})
				}
				res, err := e.Ack(context.Background(), acks)
				if err != nil {
					b.Error(err)
					return
				}
				for _, r := range res {
					if r.Err != nil {
						b.Error(r.Err)
						return
					}
				}
				got.Add(int64(len(msgs)))
			}
		}()
	}
	wg.Wait()
	return int(got.Load())
}

// BenchmarkOptionsCost: what encryption at rest and duplicate detection cost
// a push of 128-byte messages in batches of 100 (16 producers, sync always),
// each against the plain queue in the same run.
func BenchmarkOptionsCost(b *testing.B) {
	key := make([]byte, 32)
	for _, c := range []struct {
		name       string
		encrypt    bool
		withTxnIDs bool
	}{{"plain", false, false}, {"encrypted", true, false}, {"dedup", false, true}, {"encrypted+dedup", true, true}} {
		b.Run(c.name, func(b *testing.B) {
			j, err := log.Open(log.Config{Dir: b.TempDir()})
			if err != nil {
				b.Fatal(err)
			}
			e, err := engine.New(engine.Config{EncryptionKey: key, SnapshotEveryBytes: -1}, j)
			if err != nil {
				b.Fatal(err)
			}
			defer j.Close()
			defer e.Close()
			o := engine.DefaultQueueOptions()
			o.EncryptionEnabled = c.encrypt
			if _, err := e.Configure(context.Background(), "opt", o); err != nil {
				b.Fatal(err)
			}
			pl := payload128()
			var next atomic.Int64
			total := int64(b.N) * 100
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for w := 0; w < 16; w++ {
				wg.Add(1)
				go func(w int) {
					defer wg.Done()
					items := make([]engine.PushItem, 100)
					for {
						k := next.Add(100)
						if k > total {
							return
						}
						for i := range items {
							items[i] = engine.PushItem{Queue: "opt", Partition: fmt.Sprint("p", w), Payload: pl}
							if c.withTxnIDs {
								items[i].TransactionID = fmt.Sprint("tx-", k+int64(i))
							}
						}
						if _, err := e.Push(context.Background(), items); err != nil {
							b.Error(err)
							return
						}
					}
				}(w)
			}
			wg.Wait()
			b.ReportMetric(float64(total)/time.Since(start).Seconds(), "msgs/s")
		})
	}
}
