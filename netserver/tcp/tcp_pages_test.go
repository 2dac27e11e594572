package tcp_test

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/regentmq/regent/client"
	"github.com/regentmq/regent/engine"
	"github.com/regentmq/regent/netserver/internal/testhooks"
	"github.com/regentmq/regent/protocol"
)

// fillQueue pushes one message into each of n partitions of queue through
// the engine, and pops one with group g (every partition gets its cursor).
func fillQueue(t *testing.T, e *engine.Engine, queue string, n int) {
	t.Helper()
	for i := 0; i < n; i += 1000 {
		items := make([]engine.PushItem, 0, 1000)
		for k := i; k < min(i+1000, n); k++ {
			items = append(items, engine.PushItem{Queue: queue, Partition: "partition-" + strconv.Itoa(k), Payload: []byte("x")})
		}
		if _, err := e.Push(context.Background(), items); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.Pop(context.Background(), engine.PopRequest{Queue: queue, Group: "g", Batch: 1}); err != nil {
		t.Fatal(err)
	}
}

// speaker is a hand-driven connection that says a protocol minor version
// and the frame size it reads.
type speaker struct {
	t  *testing.T
	nc net.Conn
	rd *protocol.Reader
	id uint64
}

func speak(t *testing.T, f *tcpFixture, minor uint16, maxFrame int) *speaker {
	t.Helper()
	nc, err := net.Dial("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	s := &speaker{t: t, nc: nc, rd: protocol.NewReader(nc, maxFrame)}
	nc.Write(protocol.AppendHelloRequest(nil, 0, &protocol.HelloRequest{Major: protocol.VersionMajor, Minor: minor, MaxFrame: uint32(maxFrame)}))
	s.next(nil)
	return s
}

// next reads one frame (within the speaker's frame size) into reply.
func (s *speaker) next(reply protocol.Body) int {
	s.t.Helper()
	s.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	fr, err := s.rd.Next()
	if err != nil || fr.IsError() {
		s.t.Fatalf("reading a reply: %v (error frame %v)", err, fr.IsError())
	}
	if reply != nil {
		if err := reply.Decode(fr.Body); err != nil {
			s.t.Fatalf("decoding a %s reply: %v", fr.Op, err)
		}
	}
	return protocol.HeaderSize + len(fr.Body)
}

func (s *speaker) call(req, reply protocol.Body) int {
	s.t.Helper()
	s.id++
	s.nc.Write(protocol.AppendFrame(nil, s.id, req))
	return s.next(reply)
}

// TestTCPQueueInfoPages: over the binary protocol a queue's partitions come
// a page at a time (1.2): the Go client reads them all; a page never
// passes the frame its client reads, cut pages say More; a 1.1 client gets
// the first partitions that fit its frame, in a body it reads, and the
// count of them all. The queue list pages the same way.
func TestTCPQueueInfoPages(t *testing.T) {
	f := newTCP(t)
	const n = 25_000
	fillQueue(t, f.e, "big", n)
	ctx := ctx5(t)

	qi, err := f.c.QueueInfo(ctx, "big")
	if err != nil {
		t.Fatal(err)
	}
	if qi.PartitionCount != n || len(qi.Partitions) != n {
		t.Fatalf("QueueInfo: %d partitions listed, count %d, want %d", len(qi.Partitions), qi.PartitionCount, n)
	}
	for i, p := range qi.Partitions {
		if p.Name != "partition-"+strconv.Itoa(i) || len(p.Groups) != 1 {
			t.Fatalf("partition %d: %s with %d groups", i, p.Name, len(p.Groups))
		}
	}
	page, more, err := f.c.QueueInfoPage(ctx, "big", client.ID{}, 0)
	if err != nil || len(page.Partitions) != engine.DefaultPartitionPage || !more {
		t.Fatalf("default page: %d partitions, more %v: %v", len(page.Partitions), more, err)
	}
	page, more, _ = f.c.QueueInfoPage(ctx, "big", client.ID(page.Partitions[999].ID), 1<<30)
	if len(page.Partitions) != client.MaxPage || !more || page.Partitions[0].Name != "partition-1000" {
		t.Fatalf("page after 1000, limit 2^30: %d partitions from %s, more %v", len(page.Partitions), page.Partitions[0].Name, more)
	}

	// A 1.2 client reading 64 KiB frames: pages cut by bytes, More, all
	// partitions once.
	const small = 64 << 10
	s := speak(t, f, 2, small)
	var names []string
	var after protocol.UUID
	for pages := 0; ; pages++ {
		var r protocol.QueueInfoReply
		size := s.call(&protocol.QueueInfoRequest{Queue: "big", After: after, Limit: client.MaxPage}, &r)
		if size > small || len(r.Partitions) == 0 || r.PartitionCount != n {
			t.Fatalf("page %d: %d bytes, %d partitions, count %d", pages, size, len(r.Partitions), r.PartitionCount)
		}
		for _, p := range r.Partitions {
			names = append(names, p.Name)
		}
		if !r.More {
			break
		}
		after = r.Partitions[len(r.Partitions)-1].ID
	}
	if len(names) != n || names[n-1] != "partition-"+strconv.Itoa(n-1) {
		t.Fatalf("64 KiB pages listed %d partitions, the last %s", len(names), names[len(names)-1])
	}

	// A 1.1 client: no page fields, no More; what fits its frame.
	old := speak(t, f, 1, small)
	var r protocol.QueueInfoReply
	if size := old.call(&protocol.QueueInfoRequest{Queue: "big"}, &r); size > small || r.More ||
		len(r.Partitions) == 0 || len(r.Partitions) >= n || r.PartitionCount != n {
		t.Fatalf("1.1 client: %d bytes, %d partitions of %d, more %v", size, len(r.Partitions), r.PartitionCount, r.More)
	}

	// The queue list.
	for i := 0; i < 30; i++ {
		f.c.Queue(fmt.Sprintf("q%02d", i)).Push(ctx, []byte("x"))
	}
	qs, err := f.c.Queues(ctx)
	if err != nil || len(qs) != 31 || qs[0].Name != "big" || qs[0].PartitionCount != n || qs[30].Name != "q29" {
		t.Fatalf("Queues: %d queues: %v", len(qs), err)
	}
	var listed []string
	afterName := ""
	for {
		var l protocol.QueueListReply
		s.call(&protocol.QueueListRequest{After: afterName, Limit: 7}, &l)
		if len(l.Queues) > 7 || len(l.Queues) == 0 {
			t.Fatalf("a page of %d queues", len(l.Queues))
		}
		for _, q := range l.Queues {
			listed = append(listed, q.Name)
		}
		if !l.More {
			break
		}
		afterName = l.Queues[len(l.Queues)-1].Name
	}
	if len(listed) != 31 || strings.Join(listed[1:3], ",") != "q00,q01" {
		t.Fatalf("queue pages listed %v", listed)
	}
	var l protocol.QueueListReply
	if old.call(&protocol.QueueListRequest{}, &l); len(l.Queues) != 31 || l.More {
		t.Fatalf("1.1 queue list: %d queues, more %v", len(l.Queues), l.More)
	}
}

// TestTCPDLQPagesFitTheFrame: dead letters of 1 MiB listed with a limit of
// 100 come in pages that fit the 16 MiB frame (on bff180e the 20 MiB reply
// broke the connection); paging by offset lists each once.
func TestTCPDLQPagesFitTheFrame(t *testing.T) {
	f := newTCP(t)
	ctx := ctx5(t)
	if testhooks.Race { // 20 MiB through the journal and the DLQ: over 10 s under the race detector
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.Background(), 2*time.Minute)
		t.Cleanup(cancel)
	}
	big := []byte(strings.Repeat("d", 1<<20))
	for i := 0; i < 20; i++ {
		if _, err := f.c.Queue("fat").Push(ctx, big); err != nil {
			t.Fatal(err)
		}
	}
	for n := 0; n < 20; {
		msgs, err := f.c.Queue("fat").Group("g").Batch(10).Pop(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.c.Ack(ctx, msgs, client.DLQ, client.AckOptions{Error: "boom"}); err != nil {
			t.Fatal(err)
		}
		n += len(msgs)
	}
	seen := map[client.ID]bool{}
	for offset, pages := 0, 0; offset < 20; pages++ {
		entries, total, err := f.c.DLQ(ctx, client.DLQFilter{Queue: "fat", Limit: 100, Offset: offset})
		if err != nil || total != 20 || len(entries) == 0 || (pages == 0 && len(entries) == 20) {
			t.Fatalf("page at %d: %d entries of %d: %v", offset, len(entries), total, err)
		}
		for _, e := range entries {
			if seen[e.ID] || len(e.Message.Payload) != 1<<20 {
				t.Fatalf("entry %v again, or cut", e.ID)
			}
			seen[e.ID] = true
		}
		offset += len(entries)
	}
	if err := f.c.Ping(ctx); err != nil {
		t.Fatalf("the connection broke: %v", err)
	}
}
