package tcp_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/regentmq/regent/client"
	"github.com/regentmq/regent/engine"
	"github.com/regentmq/regent/log"
	"github.com/regentmq/regent/netserver"
	"github.com/regentmq/regent/netserver/tcp"
	"github.com/regentmq/regent/protocol"
)

// TestDLQAcrossEngines: a door with no one engine (a broker of replicated
// shards) lists the dead letters of its engines merged, a page of each
// engine at a time: 40 dead letters of 1 MiB on each of two engines, a
// page of 100 asked for from the first (cut to the frame) and one at
// offset 70 are answered. Before, the door held offset+limit entries of
// each engine and refused past four frames' worth: both were answered
// too_large. A door with neither an engine nor a data plane is not built.
func TestDLQAcrossEngines(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var engs []*engine.Engine
	payload := bytes.Repeat([]byte("x"), 1<<20)
	for range 2 {
		j, err := log.Open(log.Config{Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		e, err := engine.New(engine.Config{SnapshotEveryBytes: -1, MaxPopBytes: tcp.PopBytesFor(protocol.DefaultMaxFrame)}, j)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close(); j.Close() })
		for range 40 {
			if _, err := e.Push(ctx, []engine.PushItem{{Queue: "dl", Payload: payload}}); err != nil {
				t.Fatal(err)
			}
			msgs, err := e.Pop(ctx, engine.PopRequest{Queue: "dl"})
			if err != nil || len(msgs) != 1 {
				t.Fatal(msgs, err)
			}
			m := msgs[0]
			if res, err := e.Ack(ctx, []engine.AckItem{{PartitionID: m.PartitionID, HasOffset: true, Offset: m.Offset, LeaseID: m.LeaseID, Status: engine.DLQ}}); err != nil || res[0].Err != nil {
				t.Fatal(res, err)
			}
		}
		engs = append(engs, e)
	}
	if _, err := tcp.New(tcp.Config{Addr: "127.0.0.1:0"}, nil); err == nil {
		t.Fatal("a door with neither an engine nor a data plane was built")
	}
	srv, err := tcp.New(tcp.Config{Addr: "127.0.0.1:0", Plane: netserver.EnginePlane{E: engs[0]}, Engines: func() []*engine.Engine { return engs }}, nil)
	if err == nil {
		err = srv.Start()
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		srv.Shutdown(sctx)
	})
	c, err := client.Dial(ctx, srv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	page, total, err := c.DLQ(ctx, client.DLQFilter{Queue: "dl", Limit: 5})
	if err != nil || total != 80 || len(page) != 5 || len(page[0].Message.Payload) != 1<<20 {
		t.Fatalf("first page: %d entries of %d, %v", len(page), total, err)
	}
	// 100 asked for: as many as a 16 MiB frame holds.
	page, total, err = c.DLQ(ctx, client.DLQFilter{Queue: "dl", Limit: 100})
	if err != nil || total != 80 || len(page) < 10 || len(page) >= 16 {
		t.Fatalf("a first page of 100 entries of 1 MiB: %d entries of %d, %v", len(page), total, err)
	}
	whole := page
	page, total, err = c.DLQ(ctx, client.DLQFilter{Queue: "dl", Offset: 70, Limit: 10})
	if err != nil || total != 80 || len(page) != 10 {
		t.Fatalf("a page at offset 70: %d entries of %d, %v", len(page), total, err)
	}
	// The pages are runs of one order: the first page's entries, asked
	// for at their offsets, are the same.
	again, _, err := c.DLQ(ctx, client.DLQFilter{Queue: "dl", Offset: 3, Limit: 2})
	if err != nil || len(again) != 2 || again[0].ID != whole[3].ID || again[1].ID != whole[4].ID {
		t.Fatalf("entries 3 and 4 asked for alone: %v %v", again, err)
	}
}
