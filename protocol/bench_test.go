package protocol

import (
	"fmt"
	"testing"
)

// benchPush is a push request of n items with size-byte payloads, shaped
// like a producer's batch.
func benchPush(n, size int) *PushRequest {
	r := &PushRequest{Items: make([]PushItem, n)}
	for i := range r.Items {
		r.Items[i] = PushItem{
			Queue:         "orders.eu",
			Partition:     fmt.Sprintf("customer-%04d", i%16),
			TransactionID: fmt.Sprintf("txn-0000000000-%06d", i),
			TraceID:       "trace-4bf92f3577b34da6",
			Payload:       make([]byte, size),
		}
	}
	return r
}

// benchPop is a pop reply of n messages with size-byte payloads.
func benchPop(n, size int) *PopReply {
	r := &PopReply{Queue: "orders.eu", Group: "billing", Messages: make([]Message, n)}
	for i := range r.Messages {
		r.Messages[i] = Message{
			ID:            UUID{0: 1, 15: byte(i)},
			TransactionID: fmt.Sprintf("txn-0000000000-%06d", i),
			TraceID:       "trace-4bf92f3577b34da6",
			Payload:       make([]byte, size),
			CreatedAt:     1_750_000_000_000_000_000 + int64(i),
			Partition:     "customer-0001",
			PartitionID:   UUID{0: 2},
			Offset:        1_000_000 + uint64(i),
			LeaseID:       UUID{0: 3},
			LeaseExpires:  1_750_000_300_000_000_000,
			RetryCount:    0,
		}
	}
	return r
}

func benchEncode(b *testing.B, v Body, items int) {
	dst := AppendFrame(nil, 1, v)
	b.SetBytes(int64(len(dst)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		dst = AppendFrame(dst[:0], uint64(i), v)
	}
	b.ReportMetric(float64(items)*float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

func benchDecode(b *testing.B, v Body, items int) {
	frame := AppendFrame(nil, 1, v)
	into := newLike(v)
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		f, _, err := ReadFrame(frame, 0)
		if err != nil {
			b.Fatal(err)
		}
		if err := into.Decode(f.Body); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(items)*float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

func BenchmarkPushRequest(b *testing.B) {
	for _, c := range []struct{ batch, size int }{{100, 128}, {1, 128}, {100, 1024}} {
		v := benchPush(c.batch, c.size)
		name := fmt.Sprintf("size=%d/batch=%d", c.size, c.batch)
		b.Run("encode/"+name, func(b *testing.B) { benchEncode(b, v, c.batch) })
		b.Run("decode/"+name, func(b *testing.B) { benchDecode(b, v, c.batch) })
	}
}

func BenchmarkPopReply(b *testing.B) {
	for _, c := range []struct{ batch, size int }{{100, 128}, {1, 128}, {100, 1024}} {
		v := benchPop(c.batch, c.size)
		name := fmt.Sprintf("size=%d/batch=%d", c.size, c.batch)
		b.Run("encode/"+name, func(b *testing.B) { benchEncode(b, v, c.batch) })
		b.Run("decode/"+name, func(b *testing.B) { benchDecode(b, v, c.batch) })
	}
}

// BenchmarkFramer measures cutting a stream of 100 push frames fed in
// 16 KiB chunks, as a socket would deliver them.
func BenchmarkFramer(b *testing.B) {
	var stream []byte
	for i := range 100 {
		stream = AppendPushRequest(stream, uint64(i), benchPush(10, 128))
	}
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	var fr Framer
	for b.Loop() {
		for off := 0; off < len(stream); off += 16 << 10 {
			fr.Feed(stream[off:min(off+16<<10, len(stream))])
			for {
				if _, err := fr.Next(); err != nil {
					break
				}
			}
		}
	}
}
