package client_test

import (
	"context"
	"testing"

	"github.com/regentmq/regent/client"
	"github.com/regentmq/regent/protocol"
)

// TestStreamsOverTheBinaryProtocol: registration (fresh, the same hash,
// another hash refused with conflict, reset), a cycle that commits state,
// a sink push and a cumulative ack keeping the lease, a stale cycle
// refused whole with lease_invalid, and state read back with its filters.
func TestStreamsOverTheBinaryProtocol(t *testing.T) {
	b := newBroker(t)
	ctx := context.Background()
	c, err := client.Dial(ctx, b.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	reg := client.QueryRegistration{Name: "q", SourceQueue: "src", SinkQueue: "sink", ConfigHash: "h1"}
	q, err := c.RegisterQuery(ctx, reg)
	if err != nil || !q.Fresh || q.ID.IsZero() {
		t.Fatalf("register: %+v %v", q, err)
	}
	if again, err := c.RegisterQuery(ctx, reg); err != nil || again.Fresh || again.ID != q.ID {
		t.Fatalf("register again: %+v %v", again, err)
	}
	reg.ConfigHash = "h2"
	if _, err := c.RegisterQuery(ctx, reg); protocol.CodeOf(err) != protocol.CodeConflict {
		t.Fatalf("another hash: %v, want conflict", err)
	}
	for i := 0; i < 4; i++ {
		if _, err := c.Push(ctx, client.Item{Queue: "src", Partition: "p", TransactionID: string(rune('a' + i)), Payload: []byte{byte(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	var batch client.Batch
	if err := c.Queue("src").Partition("p").Group("streams.q").Batch(4).PopBatch(ctx, &batch); err != nil || len(batch.Messages) != 4 {
		t.Fatalf("pop: %d %v", len(batch.Messages), err)
	}
	ms := batch.Messages
	res, err := c.Cycle(ctx, client.Cycle{QueryID: q.ID, PartitionID: ms[0].PartitionID, Group: "streams.q",
		State: []client.StateOp{
			{Key: "tumb\x1f0", Value: []byte(`{"windowEnd":10}`), WindowEnd: 10, HasWindowEnd: true},
			{Key: "tumb\x1f10", Value: []byte(`{"windowEnd":20}`), WindowEnd: 20, HasWindowEnd: true},
			{Key: "other", Value: []byte(`1`)}},
		Pushes: []client.Item{{Queue: "sink", Payload: []byte("out")}},
		Ack:    &client.CycleAck{TransactionID: "b", LeaseID: ms[0].LeaseID, Count: 2}})
	if err != nil || res.Queue != "src" || res.StateOpsApplied != 3 || len(res.Pushes) != 1 || res.Pushes.FirstErr() != nil ||
		res.Ack == nil || res.Ack.Count != 2 || res.Ack.LeaseReleased {
		t.Fatalf("cycle: %+v %v", res, err)
	}
	rows, err := c.State(ctx, q.ID, ms[0].PartitionID, client.StateFilter{Prefix: "tumb\x1f", RipeAtOrBefore: 15, HasRipe: true})
	if err != nil || len(rows) != 1 || rows[0].Key != "tumb\x1f0" || string(rows[0].Value) != `{"windowEnd":10}` || rows[0].UpdatedAt.IsZero() {
		t.Fatalf("state: %+v %v", rows, err)
	}
	if rows, err := c.State(ctx, q.ID, ms[0].PartitionID, client.StateFilter{Keys: []string{"other"}}); err != nil || len(rows) != 1 {
		t.Fatalf("state by key: %+v %v", rows, err)
	}
	// A lease that is not the live one: nothing lands.
	_, err = c.Cycle(ctx, client.Cycle{QueryID: q.ID, PartitionID: ms[0].PartitionID, Group: "streams.q",
		State: []client.StateOp{{Key: "other", Delete: true}}, Pushes: []client.Item{{Queue: "sink", Payload: []byte("stale")}},
		Ack: &client.CycleAck{TransactionID: "d", LeaseID: client.ID{1}}})
	if protocol.CodeOf(err) != protocol.CodeLeaseInvalid {
		t.Fatalf("stale cycle: %v, want lease_invalid", err)
	}
	if rows, _ := c.State(ctx, q.ID, ms[0].PartitionID, client.StateFilter{Keys: []string{"other"}}); len(rows) != 1 {
		t.Fatalf("a refused cycle deleted state: %+v", rows)
	}
	// The live lease: c and d, releasing it.
	res, err = c.Cycle(ctx, client.Cycle{QueryID: q.ID, PartitionID: ms[0].PartitionID, Group: "streams.q",
		Ack: &client.CycleAck{TransactionID: "d", LeaseID: ms[0].LeaseID, ReleaseLease: true}})
	if err != nil || !res.Ack.LeaseReleased {
		t.Fatalf("cycle releasing: %+v %v", res, err)
	}
	if err := c.Queue("src").Partition("p").Group("streams.q").Batch(4).PopBatch(ctx, &batch); err != nil || len(batch.Messages) != 0 {
		t.Fatalf("acked messages came back: %d %v", len(batch.Messages), err)
	}
	var sink client.Batch
	if err := c.Queue("sink").Batch(10).AutoAck(true).PopBatch(ctx, &sink); err != nil || len(sink.Messages) != 1 || string(sink.Messages[0].Payload) != "out" {
		t.Fatalf("sink: %+v %v", sink.Messages, err)
	}
}
