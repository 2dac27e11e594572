package tcp_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/regentmq/regent/client"
	"github.com/regentmq/regent/netserver/internal/testhooks"
	"github.com/regentmq/regent/protocol"
)

// TestTCPPopRepliesFitTheFrame: 30 messages of 1 MiB popped with batch 30
// over TCP come in several replies, each within the 16 MiB frame, each one
// saying it was cut short but the last; with autoAck none is lost, and with
// leases every one is acked once.
func TestTCPPopRepliesFitTheFrame(t *testing.T) {
	if testhooks.Race {
		t.Skip("moves 30 MiB twice: minutes under the race detector")
	}
	for _, autoAck := range []bool{true, false} {
		t.Run(fmt.Sprintf("autoAck=%v", autoAck), func(t *testing.T) {
			f := newTCP(t)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			payload := func(i int) []byte { return bytes.Repeat([]byte{byte('a' + i)}, 1<<20) }
			for i := 0; i < 30; i++ {
				if _, err := f.c.Push(ctx, client.Item{Queue: "big", Partition: "p", Payload: payload(i)}); err != nil {
					t.Fatal(err)
				}
			}
			var b client.Batch
			next, replies := 0, 0
			for next < 30 {
				if err := f.c.Queue("big").Group("g").Batch(30).AutoAck(autoAck).PopBatch(ctx, &b); err != nil {
					t.Fatalf("pop after %d of 30: %v", next, err)
				}
				replies++
				if len(b.Messages) == 0 {
					t.Fatalf("reply %d is empty with %d of 30 delivered", replies, next)
				}
				for _, m := range b.Messages {
					if m.Offset != uint64(next) || !bytes.Equal(m.Payload, payload(next)) {
						t.Fatalf("reply %d: offset %d, want %d", replies, m.Offset, next)
					}
					next++
				}
				if b.Cut != (next < 30) {
					t.Fatalf("reply %d: Cut=%v after %d of 30", replies, b.Cut, next)
				}
				if !autoAck {
					res, err := f.c.AckBatch(ctx, &b, client.Completed, client.AckOptions{})
					if err != nil {
						t.Fatal(err)
					}
					for _, r := range res {
						if r.Err != nil {
							t.Fatalf("ack: %v", r.Err)
						}
					}
				}
			}
			if replies < 2 {
				t.Fatalf("30 MiB in %d reply", replies)
			}
			if m, err := f.c.Queue("big").Group("g").Batch(30).Pop(ctx); err != nil || len(m) != 0 {
				t.Fatalf("after all 30: %d more, %v", len(m), err)
			}
		})
	}
}

// TestTCPPopKeepsToTheClientsFrame: a 1.1 client that says it reads frames
// of 64 KiB gets pop replies within 64 KiB, told Cut when messages were left
// out; a message that alone cannot fit its frames is refused (too_large) and
// stays for clients that can take it.
func TestTCPPopKeepsToTheClientsFrame(t *testing.T) {
	f := newTCP(t)
	ctx := ctx5(t)
	for i := 0; i < 10; i++ {
		if _, err := f.c.Push(ctx, client.Item{Queue: "small", Partition: "p", Payload: bytes.Repeat([]byte{'s'}, 20<<10)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.c.Push(ctx, client.Item{Queue: "small", Partition: "q", Payload: bytes.Repeat([]byte{'L'}, 100<<10)}); err != nil {
		t.Fatal(err)
	}
	nc, err := net.Dial("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	const frame = 64 << 10
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	nc.Write(protocol.AppendHelloRequest(nil, 1, &protocol.HelloRequest{Major: 1, Minor: 1, MaxFrame: frame}))
	rd := protocol.NewReader(nc, frame) // a larger reply fails to read
	if fr, err := rd.Next(); err != nil || fr.IsError() {
		t.Fatalf("hello: %v", err)
	}
	pop := func(id uint64, part string) (protocol.PopReply, error) {
		nc.Write(protocol.AppendPopRequest(nil, id, &protocol.PopRequest{Queue: "small", Partition: part, Group: "g", Batch: 100, AutoAck: true}))
		fr, err := rd.Next()
		if err != nil {
			t.Fatalf("reading pop %d's reply with a %d-byte limit: %v", id, frame, err)
		}
		var r protocol.PopReply
		if fr.IsError() {
			var er protocol.ErrorReply
			er.Decode(fr.Body)
			return r, er.Err()
		}
		if err := r.Decode(fr.Body); err != nil {
			t.Fatal(err)
		}
		r.Detach()
		return r, nil
	}
	got, replies := 0, 0
	for got < 10 {
		r, err := pop(uint64(10+replies), "p")
		if err != nil {
			t.Fatal(err)
		}
		replies++
		if len(r.Messages) == 0 || r.Cut != (got+len(r.Messages) < 10) {
			t.Fatalf("reply %d: %d messages, Cut=%v, after %d", replies, len(r.Messages), r.Cut, got)
		}
		got += len(r.Messages)
	}
	if replies < 4 {
		t.Fatalf("10 messages of 20 KiB in %d replies of at most 64 KiB", replies)
	}
	if _, err := pop(99, "q"); protocol.CodeOf(err) != protocol.CodeTooLarge {
		t.Fatalf("a 100 KiB message for a client reading 64 KiB frames: %v, want too_large", err)
	}
	if m, err := f.c.Queue("small").Partition("q").Group("g").Pop(ctx); err != nil || len(m) != 1 {
		t.Fatalf("the message refused to the small client is taken by one with 16 MiB frames: %d, %v", len(m), err)
	}
}
