package httpapi

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/regentmq/regent/engine"
)

// The bridge's own work on the consume path, apart from the network and
// the engine: encoding a pop answer of 100 messages, and reading the batch
// ack a client sends back for it. These are the shapes BenchmarkHTTPPopAck
// (http_bench_test.go) moves: 128-byte JSON payloads, messages pushed
// without a transactionId (their id is their transactionId), one partition
// and one lease per pop; the engine hands them over with a bare
// transactionId (PopRequest.BareTxn).
//
//	go test ./netserver/httpapi/ -run '^$' -bench 'PopAnswer|AckBatchRead' -benchmem

func randUUID(r *rand.Rand) engine.UUID {
	var u engine.UUID
	for i := range u {
		u[i] = byte(r.Uint32())
	}
	return u
}

// hotMessages is a pop's answer of n messages as the engine hands it over.
func hotMessages(n int) []engine.Message {
	r := rand.New(rand.NewPCG(1, 2))
	pid, lease := randUUID(r), randUUID(r)
	now := time.Date(2026, 12, 5, 23, 38, 33, 0, time.UTC).UnixNano()
	msgs := make([]engine.Message, n)
	for i := range msgs {
		id := randUUID(r)
		p := fmt.Sprintf(`{"id":%d,"kind":"order.created","customer":"c-%06d","amount":1234.5,"note":"`, i, i)
		p += strings.Repeat("x", 128-len(p)-2) + `"}`
		msgs[i] = engine.Message{
			ID: id, Payload: []byte(p), CreatedAt: now + int64(i)*1377, // TransactionID "": BareTxn
			Queue: "bench", Partition: "p7", PartitionID: pid, Offset: uint64(i), LeaseID: lease, Group: "workers",
		}
	}
	return msgs
}

// hotAckBody is the batch ack a client sends for msgs.
func hotAckBody(msgs []engine.Message) []byte {
	b := []byte(`{"consumerGroup":"workers","acknowledgments":[`)
	for i, m := range msgs {
		if i > 0 {
			b = append(b, ',')
		}
		b = fmt.Appendf(b, `{"transactionId":%q,"partitionId":%q,"leaseId":%q,"status":"completed"}`,
			m.ID.String(), m.PartitionID.String(), m.LeaseID.String())
	}
	return append(b, "]}"...)
}

func BenchmarkPopAnswer(b *testing.B) {
	msgs := hotMessages(100)
	buf := make([]byte, 0, 64<<10)
	b.ReportAllocs()
	for b.Loop() {
		buf = appendPopAnswer(buf[:0], "workers", msgs, false)
	}
	b.SetBytes(int64(len(buf)))
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(msgs)), "ns/msg")
}

func BenchmarkAckBatchRead(b *testing.B) {
	msgs := hotMessages(100)
	body := hotAckBody(msgs)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		c := ackCalls.Get().(*ackCall)
		if msg, err := c.readBatch(body); err != nil || msg != "" || len(c.items) != len(msgs) {
			b.Fatalf("readBatch: %q %v, %d items", msg, err, len(c.items))
		}
		c.release()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(msgs)), "ns/msg")
}
