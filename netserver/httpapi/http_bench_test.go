package httpapi_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/regentmq/regent/broker"
	"github.com/regentmq/regent/broker/brokertest"
	"github.com/regentmq/regent/engine"
	"github.com/regentmq/regent/log"
)

// Benchmarks of the HTTP bridge as Queen's clients use it: a real broker
// on 127.0.0.1 (brokertest's: the real engine over the real journal, fsync
// policy from -sync, default always), keep-alive connections, JSON bodies.
//
//	go test ./netserver/httpapi/ -run '^$' -bench HTTP -benchtime 200000x -count 5

// benchServer starts a broker (brokertest's) with the sync policy sync and
// returns its engine and its HTTP door's URL.
func benchServer(b *testing.B, sync log.SyncPolicy) (*engine.Engine, string) {
	bb := brokertest.Start(b, broker.Options{Journal: log.Config{Sync: sync}})
	return bb.Engine(), "http://" + bb.HTTPAddr().String()
}

func benchClient(conns int) *http.Client {
	return &http.Client{Transport: &http.Transport{
		MaxIdleConns: conns, MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns, DisableCompression: true,
	}}
}

// payload128 is a 128-byte JSON object.
func payload128(i int) string {
	p := fmt.Sprintf(`{"id":%d,"kind":"order.created","customer":"c-%06d","amount":1234.5,"note":"`, i, i%1000000)
	return p + strings.Repeat("x", 128-len(p)-2) + `"}`
}

// pushBody is a push of n items of 128-byte payloads to one partition.
func pushBody(queue, partition string, n, seq int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"items":[`)
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"queue":%q,"partition":%q,"transactionId":"%s-%d-%d","payload":%s}`, queue, partition, partition, seq, i, payload128(seq*n+i))
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

func syncPolicies() []log.SyncPolicy { return []log.SyncPolicy{log.SyncAlways} }

func BenchmarkHTTPPush(b *testing.B) {
	const batch, conns, partitions = 100, 50, 50
	for _, pol := range syncPolicies() {
		b.Run(fmt.Sprintf("size=128/batch=%d/conns=%d/sync=%s", batch, conns, pol), func(b *testing.B) {
			_, url := benchServer(b, pol)
			c := benchClient(conns)
			reqs := (b.N + batch - 1) / batch
			bodies := make([][]byte, reqs)
			for i := range bodies {
				bodies[i] = pushBody("bench", "p"+strconv.Itoa(i%partitions), batch, i)
			}
			var next atomic.Int64
			var failed atomic.Int64
			b.SetBytes(128)
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for w := 0; w < conns; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						i := int(next.Add(1)) - 1
						if i >= reqs {
							return
						}
						resp, err := c.Post(url+"/api/v1/push", "application/json", bytes.NewReader(bodies[i]))
						if err != nil {
							failed.Add(1)
							continue
						}
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if resp.StatusCode != 201 {
							failed.Add(1)
						}
					}
				}()
			}
			wg.Wait()
			el := time.Since(start)
			b.StopTimer()
			if n := failed.Load(); n > 0 {
				b.Fatalf("%d pushes failed", n)
			}
			b.ReportMetric(float64(reqs*batch)/el.Seconds(), "msgs/s")
		})
	}
}

// BenchmarkHTTPPopAck pops batches of 100 (one partition each, with a
// lease) and acks each batch with one batch ack, from 50 connections, over
// messages pushed beforehand. Besides msgs/s it reports cpu-µs/msg: the
// CPU time the whole process (clients and broker) spent per message.
func BenchmarkHTTPPopAck(b *testing.B) {
	const batch, conns, partitions = 100, 50, 64
	for _, pol := range syncPolicies() {
		b.Run(fmt.Sprintf("size=128/batch=%d/conns=%d/sync=%s", batch, conns, pol), func(b *testing.B) {
			e, url := benchServer(b, pol)
			total := b.N
			// Fill the partitions through the engine.
			items := make([]engine.PushItem, 0, 1000)
			for i := 0; i < total; {
				items = items[:0]
				p := "p" + strconv.Itoa((i/1000)%partitions)
				for k := 0; k < 1000 && i < total; k, i = k+1, i+1 {
					items = append(items, engine.PushItem{Queue: "bench", Partition: p, Payload: []byte(payload128(i))})
				}
				if _, err := e.Push(context.Background(), items); err != nil {
					b.Fatal(err)
				}
			}
			c := benchClient(conns)
			var got atomic.Int64
			var failed atomic.Int64
			b.SetBytes(128)
			b.ResetTimer()
			start, cpu0 := time.Now(), processCPU()
			var wg sync.WaitGroup
			for w := 0; w < conns; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					var ack bytes.Buffer
					for got.Load() < int64(total) {
						resp, err := c.Get(url + "/api/v1/pop/queue/bench?batch=100&consumerGroup=workers")
						if err != nil {
							failed.Add(1)
							return
						}
						body, _ := io.ReadAll(resp.Body)
						resp.Body.Close()
						if resp.StatusCode == 204 {
							continue // every partition is leased right now
						}
						n := ackBodyFor(&ack, body)
						resp, err = c.Post(url+"/api/v1/ack/batch", "application/json", bytes.NewReader(ack.Bytes()))
						if err != nil {
							failed.Add(1)
							return
						}
						ab, _ := io.ReadAll(resp.Body)
						resp.Body.Close()
						if resp.StatusCode != 200 || bytes.Contains(ab, []byte(`"success":false`)) {
							failed.Add(1)
							return
						}
						got.Add(int64(n))
					}
				}()
			}
			wg.Wait()
			el := time.Since(start)
			b.StopTimer()
			cpu := processCPU() - cpu0
			if n := failed.Load(); n > 0 {
				b.Fatalf("%d pops or acks failed", n)
			}
			b.ReportMetric(float64(got.Load())/el.Seconds(), "msgs/s")
			if cpu > 0 {
				// Client and server share the process: of two builds of the
				// server, the difference is the server's. Steadier than
				// msgs/s on a machine others use.
				b.ReportMetric(float64(cpu.Microseconds())/float64(got.Load()), "cpu-µs/msg")
			}
		})
	}
}

// ackBodyFor builds the batch ack of a pop answer the way a client does,
// from each message's transactionId, partitionId and leaseId (one pop
// leases one partition, so the last two are the answer's).
func ackBodyFor(ack *bytes.Buffer, pop []byte) int {
	field := func(b []byte, key string) ([]byte, []byte) {
		i := bytes.Index(b, []byte(`"`+key+`":"`))
		if i < 0 {
			return nil, nil
		}
		b = b[i+len(key)+4:]
		j := bytes.IndexByte(b, '"')
		return b[:j], b[j:]
	}
	pid, _ := field(pop, "partitionId")
	lease, _ := field(pop, "leaseId")
	ack.Reset()
	ack.WriteString(`{"consumerGroup":"workers","acknowledgments":[`)
	n := 0
	rest := pop
	for {
		var txn []byte
		txn, rest = field(rest, "transactionId")
		if txn == nil {
			break
		}
		if n > 0 {
			ack.WriteByte(',')
		}
		ack.WriteString(`{"transactionId":"`)
		ack.Write(txn)
		ack.WriteString(`","partitionId":"`)
		ack.Write(pid)
		ack.WriteString(`","leaseId":"`)
		ack.Write(lease)
		ack.WriteString(`","status":"completed"}`)
		n++
	}
	ack.WriteString(`]}`)
	return n
}
