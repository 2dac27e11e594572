package client_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/regentmq/regent/broker"
	"github.com/regentmq/regent/client"
	"github.com/regentmq/regent/engine"
	"github.com/regentmq/regent/log"
)

// exampleBroker starts a throwaway broker for the examples; a real program
// dials its broker's address.
func exampleBroker() (addr string, stop func()) {
	dir, err := os.MkdirTemp("", "regent-example")
	if err != nil {
		panic(err)
	}
	b, err := broker.New(broker.Options{Journal: log.Config{Dir: dir}, Engine: engine.Config{SnapshotEveryBytes: -1},
		TCPAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0"})
	if err == nil {
		err = b.Main()
	}
	if err != nil {
		panic(err)
	}
	return b.TCPAddr().String(), func() { b.Exit(); os.RemoveAll(dir) }
}

func Example_push() {
	addr, stop := exampleBroker()
	defer stop()
	ctx := context.Background()
	c, err := client.Dial(ctx, addr)
	if err != nil {
		panic(err)
	}
	defer c.Close()

	res, err := c.Push(ctx,
		client.Item{Queue: "orders", Partition: "customer-42", TransactionID: "order-1001", Payload: []byte(`{"total":99.5}`)},
		client.Item{Queue: "orders", Partition: "customer-42", TransactionID: "order-1001", Payload: []byte(`{"total":99.5}`)},
	)
	if err != nil {
		panic(err)
	}
	for _, r := range res {
		fmt.Println(r.Status, r.Offset)
	}
	if err := res.FirstErr(); err != nil { // an item the broker refused
		panic(err)
	}
	// Output:
	// queued 0
	// duplicate 0
}

func Example_popAndAck() {
	addr, stop := exampleBroker()
	defer stop()
	ctx := context.Background()
	c, _ := client.Dial(ctx, addr)
	defer c.Close()
	c.Queue("events").Push(ctx, []byte("e1"), []byte("e2"))

	msgs, err := c.Queue("events").
		Group("auditor").
		SubscriptionMode(client.FromOldest).
		Batch(50).
		Wait(true). // long poll: wait for messages
		Pop(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("auditing", len(msgs))
	res, err := c.Ack(ctx, msgs, client.Completed, client.AckOptions{Group: "auditor"}) // the whole batch at once
	if err != nil {
		panic(err)
	}
	fmt.Println("first ack ok:", res[0].Err == nil)
	// Output:
	// auditing 2
	// first ack ok: true
}

// Each message of a batch gets its own answer, in one request: what Queen's
// Go client cannot do.
func Example_ackEach() {
	addr, stop := exampleBroker()
	defer stop()
	ctx := context.Background()
	c, _ := client.Dial(ctx, addr)
	defer c.Close()
	c.Queue("moderation").Push(ctx, []byte("fine"), []byte("spam"))
	msgs, _ := c.Queue("moderation").Group("mods").Batch(2).Pop(ctx)

	res, err := c.AckEach(ctx,
		client.Ack{Message: msgs[0], Status: client.Completed},
		client.Ack{Message: msgs[1], Status: client.DLQ, Error: "spam"},
	)
	if err != nil {
		panic(err)
	}
	fmt.Println(res[0].Err == nil, res[1].DeadLettered)
	dlq, total, _ := c.DLQ(ctx, client.DLQFilter{Queue: "moderation"})
	fmt.Println(total, string(dlq[0].Message.Payload), dlq[0].Error)
	// Output:
	// true true
	// 1 spam spam
}

func ExampleQueueBuilder_Each() {
	addr, stop := exampleBroker()
	defer stop()
	ctx := context.Background()
	c, _ := client.Dial(ctx, addr)
	defer c.Close()
	c.Queue("jobs").Push(ctx, []byte("resize photo 1"), []byte("resize photo 2"))

	runCtx, done := context.WithTimeout(ctx, 10*time.Second)
	handled := 0
	err := c.Queue("jobs").Group("workers").Batch(10).Each(runCtx, func(ctx context.Context, m client.Message) error {
		fmt.Println("handling", string(m.Payload))
		if handled++; handled == 2 {
			done() // stop after two: a real worker runs until shutdown
		}
		return nil // nil acks completed; an error acks failed
	})
	if err != nil && !errors.Is(err, context.Canceled) {
		panic(err)
	}
	// Output:
	// handling resize photo 1
	// handling resize photo 2
}

func ExampleTxn_Commit() {
	addr, stop := exampleBroker()
	defer stop()
	ctx := context.Background()
	c, _ := client.Dial(ctx, addr)
	defer c.Close()
	c.Queue("raw").Push(ctx, []byte(`{"n":21}`))
	in, _ := c.Queue("raw").Pop(ctx)

	// Process a message, push the result to the next queue and ack the
	// input, all or nothing.
	res, err := c.Transaction().
		Ack(in[0], client.Completed).
		Push(client.Item{Queue: "doubled", Payload: []byte(`{"n":42}`)}).
		Commit(ctx)
	if err != nil || res.Err != nil {
		panic(fmt.Sprint(err, res.Err))
	}
	out, _ := c.Queue("doubled").Pop(ctx)
	fmt.Println(string(out[0].Payload))
	// Output:
	// {"n":42}
}
