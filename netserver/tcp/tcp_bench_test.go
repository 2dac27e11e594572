package tcp_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/regentmq/regent/broker"
	"github.com/regentmq/regent/broker/brokertest"
	"github.com/regentmq/regent/client"
	"github.com/regentmq/regent/engine"
	"github.com/regentmq/regent/log"
)

// End-to-end benchmarks over loopback: a real broker (brokertest's: journal
// with sync always in a temp dir) and the real client. Run with
//
//	go test -run '^$' -bench TCP -benchtime 3s ./netserver/tcp/
var benchJournal *log.Log

func benchBroker(b *testing.B) string {
	b.Helper()
	bb := brokertest.Start(b, broker.Options{Engine: engine.Config{SnapshotEveryBytes: -1}})
	benchJournal = bb.Journal()
	return bb.TCPAddr().String()
}

func benchClient(b *testing.B, addr string, conns int) *client.Client {
	c, err := client.Dial(context.Background(), addr, client.WithConns(conns))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return c
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

// BenchmarkTCPPush: producers, each with its own connection, push batches
// of 128-byte messages; each keeps up to inflight batches unanswered (1: it
// waits for each answer). Every answer means durable: fsynced.
func BenchmarkTCPPush(b *testing.B) {
	for _, c := range []struct{ producers, inflight int }{{4, 1}, {4, 8}, {16, 1}} {
		b.Run(fmt.Sprintf("size=128/batch=100/producers=%d/inflight=%d", c.producers, c.inflight), func(b *testing.B) {
			addr := benchBroker(b)
			pl := payload128()
			total := int64(b.N) * 100
			var next atomic.Int64
			b.SetBytes(128 * 100)
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for p := 0; p < c.producers; p++ {
				cl := benchClient(b, addr, 1)
				items := make([]client.Item, 100)
				for i := range items {
					items[i] = client.Item{Queue: "bench", Partition: fmt.Sprint("p", p), Payload: pl}
				}
				for k := 0; k < c.inflight; k++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for next.Add(100) <= total {
							if _, err := cl.Push(context.Background(), items...); err != nil {
								b.Error(err)
								return
							}
						}
					}()
				}
			}
			wg.Wait()
			b.ReportMetric(float64(total)/time.Since(start).Seconds(), "msgs/s")
			reportJournal(b)
		})
	}
}

// reportJournal adds the journal's fsyncs and records per fsync.
func reportJournal(b *testing.B) {
	st := benchJournal.Stats()
	if st.Fsyncs > 0 {
		b.ReportMetric(float64(st.Records)/float64(st.Fsyncs), "records/fsync")
		b.ReportMetric(float64(st.FsyncNanosTotal)/float64(st.Fsyncs)/1e3, "µs/fsync")
	}
}

// BenchmarkTCPPopAck: consumers pop batches of 100 from a pre-filled queue
// (16 partitions) and ack each batch completed in one request; with
// pipelined, a consumer sends its ack and pops again without waiting for
// the ack's answer (at most 4 acks unanswered).
func BenchmarkTCPPopAck(b *testing.B) {
	for _, pipelined := range []bool{false, true} {
		b.Run(fmt.Sprintf("size=128/batch=100/consumers=4/pipelined=%v", pipelined), func(b *testing.B) {
			addr := benchBroker(b)
			pl := payload128()
			total := b.N * 100
			fillc := benchClient(b, addr, 2)
			for p := 0; p < 16; p++ {
				left := total/16 + 1
				for left > 0 {
					k := min(left, 1000)
					items := make([]client.Item, k)
					for i := range items {
						items[i] = client.Item{Queue: "bench", Partition: fmt.Sprint("p", p), Payload: pl}
					}
					if _, err := fillc.Push(context.Background(), items...); err != nil {
						b.Fatal(err)
					}
					left -= k
				}
			}
			b.SetBytes(128 * 100)
			b.ResetTimer()
			start := time.Now()
			var got atomic.Int64
			var wg sync.WaitGroup
			for w := 0; w < 4; w++ {
				c := benchClient(b, addr, 1)
				wg.Add(1)
				go func() {
					defer wg.Done()
					ctx := context.Background()
					acks := make(chan struct{}, 4)
					var ackWG sync.WaitGroup
					defer ackWG.Wait()
					for got.Load() < int64(total) {
						msgs, err := c.Queue("bench").Batch(100).Pop(ctx)
						if err != nil {
							b.Error(err)
							return
						}
						if len(msgs) == 0 {
							continue
						}
						ack := func() {
							res, err := c.Ack(ctx, msgs, client.Completed, client.AckOptions{})
							if err != nil || res[0].Err != nil {
								b.Error(err, res[0].Err)
							}
							got.Add(int64(len(msgs)))
						}
						if !pipelined {
							ack()
							continue
						}
						acks <- struct{}{}
						ackWG.Add(1)
						go func() {
							defer ackWG.Done()
							ack()
							<-acks
						}()
					}
				}()
			}
			wg.Wait()
			b.ReportMetric(float64(got.Load())/time.Since(start).Seconds(), "msgs/s")
		})
	}
}

// BenchmarkTCPRoundTrip: one small request at a time on an idle broker;
// reports the p50 and p99 round trip.
func BenchmarkTCPRoundTrip(b *testing.B) {
	b.Run("op=ping", func(b *testing.B) {
		c := benchClient(b, benchBroker(b), 1)
		lat := make([]time.Duration, 0, b.N)
		ctx := context.Background()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			t := time.Now()
			if err := c.Ping(ctx); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(t))
		}
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	})
}
