package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/regentmq/regent/client"
	"github.com/regentmq/regent/protocol"
)

func peekText(p client.PeekPage) string {
	var b strings.Builder
	for _, m := range p.Messages {
		fmt.Fprintf(&b, "%s:%d=%s ", m.Partition, m.Offset, m.Payload)
	}
	return strings.TrimSpace(b.String())
}

// TestPeek: a peek shows the same messages twice and leases none (a pop
// afterwards gets them all); the last N, pages that go on from Next, a
// start beyond the end, and what does not exist.
func TestPeek(t *testing.T) {
	b := newBroker(t)
	c := dial(t, b)
	ctx := testCtx(t)
	if _, err := c.Queue("pk").Partition("a").Push(ctx, []byte("a0"), []byte("a1"), []byte("a2")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Queue("pk").Partition("b").Push(ctx, []byte("b0")); err != nil {
		t.Fatal(err)
	}
	first, err := c.Peek(ctx, client.PeekRequest{Queue: "pk"})
	if err != nil || peekText(first) != "a:0=a0 a:1=a1 a:2=a2 b:0=b0" || first.More || !first.Next.IsZero() {
		t.Fatalf("peek: %q more %v: %v", peekText(first), first.More, err)
	}
	m := first.Messages[1]
	if m.Queue != "pk" || m.Size != 2 || m.Cut() || m.TransactionID != m.ID.String() || m.CreatedAt.IsZero() || m.PartitionID.IsZero() {
		t.Errorf("message %+v", m)
	}
	again, _ := c.Peek(ctx, client.PeekRequest{Queue: "pk"})
	if peekText(again) != peekText(first) || again.Messages[0].ID != first.Messages[0].ID {
		t.Errorf("a second peek: %q", peekText(again))
	}
	if p, _ := c.Peek(ctx, client.PeekRequest{Queue: "pk", Last: 2}); peekText(p) != "a:1=a1 a:2=a2 b:0=b0" {
		t.Errorf("last 2: %q", peekText(p))
	}
	p, _ := c.Peek(ctx, client.PeekRequest{Queue: "pk", Limit: 2, MaxPayload: 1})
	if peekText(p) != "a:0=a a:1=a" || !p.More || p.Next.Offset != 2 || !p.Messages[0].Cut() {
		t.Errorf("limit 2, payloads of 1 byte: %q, more %v, next %+v", peekText(p), p.More, p.Next)
	}
	p, _ = c.Peek(ctx, client.PeekRequest{Queue: "pk", Limit: 2, After: p.Next})
	if peekText(p) != "a:2=a2 b:0=b0" || p.More {
		t.Errorf("the next page: %q, more %v", peekText(p), p.More)
	}
	if p, err := c.Peek(ctx, client.PeekRequest{Queue: "pk", Partition: "a", From: 99}); err != nil || len(p.Messages)+len(p.Gaps) != 0 || p.More {
		t.Errorf("from beyond the end: %+v %v", p, err)
	}
	if _, err := c.Peek(ctx, client.PeekRequest{Queue: "nope"}); protocol.CodeOf(err) != protocol.CodeQueueNotFound {
		t.Errorf("no queue: %v", err)
	}
	if _, err := c.Peek(ctx, client.PeekRequest{Queue: "pk", Partition: "nope"}); protocol.CodeOf(err) != protocol.CodePartitionNotFound {
		t.Errorf("no partition: %v", err)
	}
	if _, err := c.Peek(ctx, client.PeekRequest{Queue: "pk", Last: -1}); err == nil {
		t.Error("Last -1 accepted")
	}
	// Nothing was leased: a pop gets every message, in order.
	msgs, err := c.Queue("pk").Partition("a").Batch(10).Pop(ctx)
	if err != nil || len(msgs) != 3 || string(msgs[0].Payload) != "a0" {
		t.Fatalf("pop after peeking: %d messages: %v", len(msgs), err)
	}
}

// TestPeekWhilePushing: peeks of the last messages while pushes of 1 MiB
// land: every page is in order and whole, and the last peek sees them all.
func TestPeekWhilePushing(t *testing.T) {
	b := newBroker(t)
	c := dial(t, b)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // 1 MiB messages under the race detector
	defer cancel()
	big := bytes.Repeat([]byte("z"), 1<<20)
	if _, err := c.Queue("busy").Push(ctx, big); err != nil {
		t.Fatal(err)
	}
	const pushes = 6
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < pushes; i++ {
			if _, err := c.Queue("busy").Push(ctx, big); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	defer func() { <-done }()
	check := func(i int) client.PeekPage {
		p, err := c.Peek(ctx, client.PeekRequest{Queue: "busy", Last: 3})
		if err != nil {
			t.Fatal(err)
		}
		for k, m := range p.Messages {
			if m.Cut() || !bytes.Equal(m.Payload, big) || (k > 0 && m.Offset != p.Messages[k-1].Offset+1) {
				t.Fatalf("peek %d, message %d: offset %d, %d of %d bytes", i, k, m.Offset, len(m.Payload), m.Size)
			}
		}
		return p
	}
	for i := 0; ; i++ {
		select {
		case <-done:
			if p := check(i); len(p.Messages) != 3 || p.Messages[2].Offset != pushes {
				t.Fatalf("after the pushes: %d messages, the last at %d", len(p.Messages), p.Messages[len(p.Messages)-1].Offset)
			}
			return
		default:
			check(i)
		}
	}
}

// TestPeekOnAnOlderBroker: a broker that speaks 1.2 would close the
// connection on an opcode it does not know: Peek says so and sends nothing.
func TestPeekOnAnOlderBroker(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan protocol.Op, 16)
	go func() {
		defer close(got)
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		rd := protocol.NewReader(nc, 0)
		for {
			f, err := rd.Next()
			if err != nil {
				return
			}
			got <- f.Op
			if f.Op == protocol.OpHello {
				nc.Write(protocol.AppendHelloReply(nil, f.ID, &protocol.HelloReply{Major: 1, Minor: 2, ServerName: "old",
					MaxFrame: protocol.DefaultMaxFrame, MaxInFlight: 8}))
			}
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, ln.Addr().String(), client.WithConns(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Peek(ctx, client.PeekRequest{Queue: "q"}); !errors.Is(err, client.ErrPeekUnsupported) ||
		protocol.CodeOf(err) != protocol.CodeUnknownOp {
		t.Fatalf("peek on a 1.2 broker: %v", err)
	}
	ln.Close() // (Close's reconnect race, if any, is refused at once)
	c.Close()  // the fake broker reads to the end of the connection
	for op := range got {
		if op != protocol.OpHello {
			t.Fatalf("the client sent %s to a 1.2 broker", op)
		}
	}
}
