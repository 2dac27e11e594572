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

// TestDLQAcrossEnginesIsBounded: a door with no one engine (a broker of
// replicated shards) lists the dead letters of its engines merged, and a
// page deep enough to need every engine's large entries in memory is
// refused with too_large instead of held: 40 dead letters of 1 MiB on each
// of two engines, a first page of 5 answered, one at offset 70 refused. A
// door with neither an engine nor a data plane is not built.
func TestDLQAcrossEnginesIsBounded(t *testing.T) {
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
	if _, _, err := c.DLQ(ctx, client.DLQFilter{Queue: "dl", Offset: 70, Limit: 10}); protocol.CodeOf(err) != protocol.CodeTooLarge {
		t.Fatalf("a page needing 80 MiB of entries: %v, want too_large", err)
	}
}
