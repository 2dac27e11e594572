package client_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/regentmq/regent/broker/brokertest"
	"github.com/regentmq/regent/client"
	"github.com/regentmq/regent/protocol"
)

// TestWithoutClusterTalksToTheBrokerDialled: a client dialled to a
// cluster's broker WithoutCluster does not route: each push goes to that
// broker, which stores the partitions it owns and refuses the others'
// with not_owner, as a broker asked by a peer must. Once the broker is
// gone, a call fails at once with unavailable rather than wait.
func TestWithoutClusterTalksToTheBrokerDialled(t *testing.T) {
	cl := brokertest.StartCluster(t, 3, nil)
	ctx := testCtx(t)
	c, err := client.Dial(ctx, cl.Brokers[0].TCPAddr().String(), client.WithoutCluster())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	stored, refused := 0, 0
	for p := range 24 {
		_, err := c.Push(ctx, client.Item{Queue: "jobs", Partition: fmt.Sprintf("p%d", p), Payload: []byte("x")})
		switch code := protocol.CodeOf(err); code {
		case protocol.CodeOK:
			stored++
		case protocol.CodeNotOwner:
			refused++
		default:
			t.Fatalf("push to p%d through b1 alone: %v", p, err)
		}
	}
	if st := cl.Brokers[0].Engine().Stats(); st.Pushed != uint64(stored) {
		t.Fatalf("b1 stored %d messages, the client saw %d stored", st.Pushed, stored)
	}
	if stored == 0 || refused == 0 {
		t.Fatalf("%d partitions stored and %d refused through b1: want some of each", stored, refused)
	}
	for i := 1; i < 3; i++ {
		if st := cl.Brokers[i].Engine().Stats(); st.Pushed != 0 {
			t.Fatalf("b%d stored %d messages sent to b1", i+1, st.Pushed)
		}
	}

	cl.Stop(0)
	brokertest.CheckFor(t, 10*time.Second, func() error {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		start := time.Now()
		err := c.Ping(cctx)
		if el := time.Since(start); el > time.Second {
			t.Fatalf("a ping to a stopped broker took %v", el)
		}
		if protocol.CodeOf(err) != protocol.CodeUnavailable {
			return fmt.Errorf("a ping to a stopped broker: %v, want unavailable", err)
		}
		return nil
	})
}

// TestAckByMessageIDAndTxnAddAck: an ack may name its message by id
// inside its lease (Ack.ByMessageID), and a transaction may carry an ack
// by transactionId (Txn.AddAck).
func TestAckByMessageIDAndTxnAddAck(t *testing.T) {
	b := newBroker(t)
	c := dial(t, b)
	ctx := testCtx(t)
	if res, err := c.Push(ctx, client.Item{Queue: "q", Payload: []byte("a")}, client.Item{Queue: "q", TransactionID: "t-2", Payload: []byte("b")}); err != nil || res.FirstErr() != nil {
		t.Fatal(err, res.FirstErr())
	}
	msgs, err := c.Queue("q").Batch(2).Pop(ctx)
	if err != nil || len(msgs) != 2 {
		t.Fatalf("pop: %d %v", len(msgs), err)
	}
	byID := msgs[0]
	byID.Offset = 99 // not sent: the id names it
	out, err := c.AckEach(ctx, client.Ack{Message: byID, Status: client.Completed, ByMessageID: true})
	if err != nil || out[0].Err != nil || out[0].Offset != 0 {
		t.Fatalf("ack by message id: %+v %v", out, err)
	}
	named := client.Message{PartitionID: msgs[1].PartitionID, LeaseID: msgs[1].LeaseID, TransactionID: "t-2"}
	r, err := c.Transaction().AddAck(client.Ack{Message: named, Status: client.Completed, ByTransactionID: true}).
		Push(client.Item{Queue: "next", Payload: []byte("c")}).Commit(ctx)
	if err != nil || r.Err != nil || len(r.Acks) != 1 || r.Acks[0].Offset != 1 {
		t.Fatalf("transaction with an ack by transactionId: %+v %v", r, err)
	}
	if m, err := c.Queue("q").Pop(ctx); err != nil || len(m) != 0 {
		t.Fatalf("after both acks the queue still gives %d messages (%v)", len(m), err)
	}
	var pe *protocol.Error
	if _, err := c.Queue("next").Pop(ctx); errors.As(err, &pe) {
		t.Fatalf("pop of the pushed message: %v", err)
	}
}
