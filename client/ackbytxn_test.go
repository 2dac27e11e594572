package client_test

import (
	"testing"

	"github.com/regentmq/regent/client"
	"github.com/regentmq/regent/protocol"
)

// TestAckByTransactionID: an ack may name its message by transactionId (or,
// for one pushed without, its id in text) inside its lease, without the
// offset; a transactionId the lease does not hold is refused, and changes
// nothing.
func TestAckByTransactionID(t *testing.T) {
	b := newBroker(t)
	c := dial(t, b)
	ctx := testCtx(t)
	res, err := c.Push(ctx, client.Item{Queue: "q", TransactionID: "order-1", Payload: []byte("a")},
		client.Item{Queue: "q", Payload: []byte("b")}, client.Item{Queue: "q", TransactionID: "order-3", Payload: []byte("c")})
	if err != nil || res.FirstErr() != nil {
		t.Fatal(err, res.FirstErr())
	}
	msgs, err := c.Queue("q").Group("g").Batch(3).Pop(ctx)
	if err != nil || len(msgs) != 3 {
		t.Fatalf("pop: %d %v", len(msgs), err)
	}
	// Only what a pop prints: the partition, the lease, the group, and the
	// transactionIds (the second message's is its id, in text).
	named := func(txn string) client.Message {
		return client.Message{PartitionID: msgs[0].PartitionID, LeaseID: msgs[0].LeaseID, Group: "g", TransactionID: txn}
	}
	if msgs[1].TransactionID != msgs[1].ID.String() {
		t.Fatalf("a message pushed without a transactionId came with %q", msgs[1].TransactionID)
	}
	out, err := c.AckEach(ctx,
		client.Ack{Message: named("order-3"), Status: client.Completed, ByTransactionID: true},
		client.Ack{Message: named("no-such-order"), Status: client.Completed, ByTransactionID: true},
		client.Ack{Message: named(msgs[1].ID.String()), Status: client.Completed, ByTransactionID: true})
	if err != nil {
		t.Fatal(err)
	}
	if out[0].Err != nil || out[0].Offset != 2 || out[2].Err != nil || out[2].Offset != 1 {
		t.Fatalf("acks by transactionId: %+v", out)
	}
	if protocol.CodeOf(out[1].Err) != protocol.CodeNotInFlight {
		t.Fatalf("an unknown transactionId: %v", out[1].Err)
	}
	// The lease lives on (order-1 is not answered); answering it ends it and
	// moves the cursor past all three.
	out, err = c.AckEach(ctx, client.Ack{Message: named("order-1"), Status: client.Completed, ByTransactionID: true})
	if err != nil || out[0].Err != nil || out[0].Offset != 0 || !out[0].LeaseReleased {
		t.Fatalf("ack of order-1: %+v %v", out, err)
	}
	if m, err := c.Queue("q").Group("g").Pop(ctx); err != nil || len(m) != 0 {
		t.Fatalf("after the acks the group still gets %d messages (%v)", len(m), err)
	}
}
